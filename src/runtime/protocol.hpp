// The wire: multipart ZeroMQ messages, a fixed binary header frame, then payload frames.
//
// The runtime's own kinds are below; a service (a pool, a ring, a manager) names its kinds in its
// own wire header as service_kind<its block, n>, and the runtime routes them without reading
// them: at the master to the service the channel names; at a worker to the service the channel
// names when the header is flagged a reply, else to the worker's service loop
// (worker_side::next_service_message).
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <type_traits>
#include <zmq.hpp>

#include "fiber/error.hpp"
#include "transport/message_frames.hpp"

namespace fiber::detail {

inline constexpr std::uint16_t protocol_version = 2;

enum class kind : std::uint8_t {
  hello = 1,     // worker -> master: JSON {protocol, build_id, registry, pid, executable}
  welcome,       // master -> worker: JSON config snapshot, then the call (function id + args)
  refuse,        // master -> worker: text reason; the worker exits
  done,          // worker -> master: target finished; aux=0 ok, 1 raised (core/remote_failure)
  put,           // any -> owner: channel, payload frames
  get,           // any -> owner: channel, request id
  item,          // owner -> getter: channel, request id, payload frames
  cancel_get,    // getter -> owner: channel, request id
  cancelled,     // owner -> getter: the get with this request id was withdrawn
  failure,       // owner -> peer: text; request id names the failed request, if any; aux: a fiber::errc, or 0
  probe,         // master -> any worker: ignored; its delivery failing means the peer is gone
  service_gone,  // master -> worker: the service `channel` is gone; `request` is the call that asked
  maker_gone,    // nested master -> up: its child with channel prefix `aux` has ended, and its channels
  record,        // nested master -> up: an event for the top's flight recorder; aux: its record_kind;
                 // frames: the process's name in the tree, c and d (8 bytes each), text
  record_batch,  // nested master -> up: its own flight recorder's records (its pools' events) for the
                 // top's; frames: its channel prefix and its recorder's clock now (8 bytes each),
                 // its name in the tree, the records (flight_recorder's format, names said once)
  pool_view,     // nested master -> up: one of its pools as the top's dashboard shows it, every
                 // dashboard_interval_ms while it runs; aux: 1 once it ended; frames: the pool's id
                 // (8 bytes; its prefix in the high half), the process's name in the tree, its state (JSON)
};
inline constexpr std::uint8_t last_runtime_kind = static_cast<std::uint8_t>(kind::pool_view);
/// Kinds from here on belong to services.
inline constexpr std::uint8_t first_service_kind = 32;
inline constexpr std::uint8_t last_service_kind = 71;
constexpr bool is_service_kind(kind k) { return static_cast<std::uint8_t>(k) >= first_service_kind; }

/// Each service owns a block of kinds_per_block kinds, listed here once, so that no two services
/// share a kind: a message that reached the wrong service is then never read as one of its own.
enum class service_block : std::uint8_t { pool, ring, manager, spawn, pool_more, count };
inline constexpr std::uint8_t kinds_per_block = 8;
static_assert(first_service_kind + static_cast<int>(service_block::count) * kinds_per_block - 1 <= last_service_kind,
              "fiber: the services' blocks of kinds overflow the service range; raise last_service_kind");

/// The kind `n` of service `block` (pool/wire.hpp: service_kind<service_block::pool, 0>).
template <service_block block, std::uint8_t n>
consteval kind service_kind() {
  static_assert(block < service_block::count, "fiber: no such service block; add it to service_block");
  static_assert(n < kinds_per_block, "fiber: a service has at most kinds_per_block kinds; number them from 0");
  return static_cast<kind>(first_service_kind + static_cast<std::uint8_t>(block) * kinds_per_block + n);
}

/// header::flags
inline constexpr std::uint8_t flag_reply = 1;          // to a worker: for its service `channel`, not its loop
inline constexpr std::uint8_t flag_expects_reply = 2;  // to the master: answer service_gone if `channel` is gone

struct header {
  kind type{};
  std::uint8_t flags = 0;
  std::uint16_t version = protocol_version;
  std::uint32_t aux = 0;
  std::uint64_t channel = 0;
  std::uint64_t request = 0;
};
static_assert(sizeof(header) == 24);

inline zmq::message_t make_header(kind k, std::uint64_t channel = 0, std::uint64_t request = 0, std::uint32_t aux = 0,
                                  std::uint8_t flags = 0) {
  header h{k, flags, protocol_version, aux, channel, request};
  return zmq::message_t(&h, sizeof h);
}

/// Where a message goes and what it answers: the header's fields besides its kind.
struct route {
  std::uint64_t channel = 0;
  std::uint64_t request = 0;
  std::uint32_t aux = 0;
  std::uint8_t flags = 0;
};

/// A trivially copyable value sent as one frame of its bytes.
template <class T>
struct pod_part {
  static_assert(std::is_trivially_copyable_v<T>);
  const T& value;
};
template <class T>
pod_part<T> as_pod(const T& value) {
  return {value};
}

namespace message_parts {
inline void add(multipart& m, zmq::message_t&& frame) { m.push_back(std::move(frame)); }
inline void add(multipart& m, std::string_view bytes) { m.emplace_back(bytes.data(), bytes.size()); }
template <class T>
void add(multipart& m, pod_part<T> p) {
  m.emplace_back(&p.value, sizeof(T));
}
inline void add(multipart& m, multipart&& frames) {
  for (auto& f : frames) m.push_back(std::move(f));
}
/// An encoded value: its frames (large ranges without copies when the writer owns them).
inline void add(multipart& m, writer& w) { add(m, to_frames(w)); }
}  // namespace message_parts

/// The one way fiber builds a message: the header of kind `k` on `r`, then each part in order
/// (a frame, bytes, as_pod(value), frames to append, or an encoded writer).
template <class... Parts>
multipart make_message(kind k, route r, Parts&&... parts) {
  multipart m;
  m.reserve(1 + sizeof...(Parts));
  m.push_back(make_header(k, r.channel, r.request, r.aux, r.flags));
  (message_parts::add(m, std::forward<Parts>(parts)), ...);
  return m;
}

/// nullopt when the frame is not a header of this protocol version.
inline std::optional<header> parse_header(const zmq::message_t& m) {
  if (m.size() != sizeof(header)) return std::nullopt;
  header h;
  std::memcpy(&h, m.data(), sizeof h);
  auto k = static_cast<std::uint8_t>(h.type);
  bool known = (k >= 1 && k <= last_runtime_kind) || (k >= first_service_kind && k <= last_service_kind);
  if (h.version != protocol_version || !known) return std::nullopt;
  return h;
}

/// The header of a message from an authenticated peer, which always sends one: a message without
/// is the peer's bug, reported as fiber::error(malformed_message) naming `from`.
inline header header_of(const multipart& m, const char* from) {
  auto h = m.empty() ? std::nullopt : parse_header(m[0]);
  if (!h) throw error(errc::malformed_message, std::string("a message from ") + from + " has no header of this protocol");
  return *h;
}

}  // namespace fiber::detail
