// The wire: multipart ZeroMQ messages, a fixed binary header frame, then payload frames.
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <zmq.hpp>

namespace fiber::detail {

inline constexpr std::uint16_t protocol_version = 1;

enum class kind : std::uint8_t {
  hello = 1,    // worker -> master: JSON {protocol, build_id, registry, pid, executable}
  welcome,      // master -> worker: JSON config snapshot, then the call (function id + args)
  refuse,       // master -> worker: text reason; the worker exits
  done,         // worker -> master: target finished; aux=0 ok, 1 exception (JSON type/message)
  put,          // any -> owner: channel, payload frames
  get,          // any -> owner: channel, request id
  item,         // owner -> getter: channel, request id, payload frames
  cancel_get,   // getter -> owner: channel, request id
  cancelled,    // owner -> getter: the get with this request id was withdrawn
  failure,      // owner -> peer: text; request id names the failed request, if any
  pool_ready,   // pool worker -> master: channel = pool id, aux = tasks it can take now
  pool_task,    // master -> pool worker: channel = pool id, request = task id; see pool.cpp
  pool_result,  // pool worker -> master: channel = pool id, request = task id; see pool.cpp
  pool_stop,    // master -> pool worker: finish and exit
  probe,        // master -> any worker: ignored; its delivery failing means the peer is gone
  mgr_call,     // caller -> master -> manager server: channel = manager id, request = call id
  mgr_reply,    // server -> master -> caller: channel = manager id, request = call id, aux = status
  mgr_stop,     // master -> manager server: exit
};
inline constexpr std::uint8_t last_kind = static_cast<std::uint8_t>(kind::mgr_stop);

struct header {
  kind type{};
  std::uint8_t flags = 0;
  std::uint16_t version = protocol_version;
  std::uint32_t aux = 0;
  std::uint64_t channel = 0;
  std::uint64_t request = 0;
};
static_assert(sizeof(header) == 24);

inline zmq::message_t make_header(kind k, std::uint64_t channel = 0, std::uint64_t request = 0, std::uint32_t aux = 0) {
  header h{k, 0, protocol_version, aux, channel, request};
  return zmq::message_t(&h, sizeof h);
}

/// nullopt when the frame is not a header of this protocol version.
inline std::optional<header> parse_header(const zmq::message_t& m) {
  if (m.size() != sizeof(header)) return std::nullopt;
  header h;
  std::memcpy(&h, m.data(), sizeof h);
  auto k = static_cast<std::uint8_t>(h.type);
  if (h.version != protocol_version || k == 0 || k > last_kind) return std::nullopt;
  return h;
}

}  // namespace fiber::detail
