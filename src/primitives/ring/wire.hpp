// A ring's messages between its members and the master's ring service (the rendezvous store).
//   set      member -> master  request, frames: key, value; reply: empty
//   get      member -> master  request, aux = timeout in ms, frames: key; reply: value
//   add      member -> master  request, frames: key, delta (i64); reply: the sum (i64)
//   reply    master -> member  request, aux = reply_ok | reply_failed (frames: errc (i32), text)
#pragma once
#include <cstdint>

#include "runtime/protocol.hpp"

namespace fiber::detail {
namespace ring_kind {
inline constexpr kind set = service_kind(1);
inline constexpr kind get = service_kind(2);
inline constexpr kind add = service_kind(3);
inline constexpr kind reply = service_kind(4);
}  // namespace ring_kind

inline constexpr std::uint32_t ring_reply_ok = 0;
inline constexpr std::uint32_t ring_reply_failed = 1;

/// Store keys the master sets itself once every member has started.
inline std::string ring_local_key(int rank) { return "fiber/local/" + std::to_string(rank); }

}  // namespace fiber::detail
