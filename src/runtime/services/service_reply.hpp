// How a service answers a call (a manager's, the ring store's): the reply's aux says how it went,
// and a failure travels as a core/remote_failure, the one form failures take on every path.
#pragma once
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "core/remote_failure.hpp"
#include "fiber/error.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {

/// A reply's aux: its frames hold the value (reply_value) or a core/remote_failure raised by the
/// user's code (reply_raised) or of fiber's own (reply_failed).
enum reply_status : std::uint32_t { reply_value = 0, reply_raised = 1, reply_failed = 2 };

/// A reply's frames for fiber's own failure `code`.
inline std::string failure_reply(errc code, const std::string& what) { return remote_failure::fiber_error(code, what).encode(); }
/// The error a failed reply's frames say.
inline std::exception_ptr reply_error(const multipart& payload) {
  return remote_failure::decode(payload.empty() ? std::string_view() : payload[0].to_string_view()).exception();
}

}  // namespace fiber::detail
