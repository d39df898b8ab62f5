// A ring's messages between its members and the master's ring service (the rendezvous store).
//   set      member -> master  request, frames: key, value; reply: empty
//   get      member -> master  request, aux = timeout in ms, frames: key; reply: value
//   add      member -> master  request, frames: key, delta (i64); reply: the sum (i64)
//   reply    master -> member  request, aux = reply_status (runtime/services/service_reply.hpp): the value,
//                              or a core/remote_failure
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <optional>
#include <string_view>

#include "runtime/protocol.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {
namespace ring_kind {
inline constexpr kind set = service_kind<service_block::ring, 0>();
inline constexpr kind get = service_kind<service_block::ring, 1>();
inline constexpr kind add = service_kind<service_block::ring, 2>();
inline constexpr kind reply = service_kind<service_block::ring, 3>();
}  // namespace ring_kind

/// A member's call to the store, as read from its frames.
struct store_request {
  kind type{};
  std::string key;
  std::string value;                  // set
  std::int64_t delta = 0;             // add
  std::chrono::milliseconds timeout{};  // get
};
/// Reads a store call; fiber::error(malformed_message) for frames that do not hold one, or a kind
/// the store does not know.
store_request read_store_request(const header& h, const multipart& payload);

/// The value of a store's add reply, or fiber::error(malformed_message).
std::int64_t read_add_reply(std::string_view reply);
/// A number the store keeps (what add adds to), or nullopt for text that is not one.
std::optional<std::int64_t> stored_number(std::string_view text);

/// Store keys the master sets itself once every member has started.
inline std::string ring_local_key(int rank) { return "fiber/local/" + std::to_string(rank); }

}  // namespace fiber::detail
