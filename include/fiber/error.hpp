/// @file
/// Error codes, the error category and the exceptions fiber throws.
#pragma once
#include <string>
#include <system_error>
#include "fiber/detail/export.hpp"

namespace fiber {

/// What went wrong, as `std::error_code`s of fiber_category(): an `errc` compares equal to the
/// code of a fiber::error that carries it.
enum class errc {
  not_registered = 1,   ///< a function/class was used without FIBER_REMOTE
  binary_mismatch,      ///< a worker runs a different executable than the master
  protocol_error,       ///< a peer spoke a different protocol version or sent the wrong message
  malformed_message,    ///< a message could not be decoded
  message_too_large,    ///< a payload exceeds max_message_bytes
  config_error,         ///< unknown key or bad value in the configuration
  spawn_failed,         ///< the backend could not start a child
  worker_lost,          ///< a child died before it finished what it was asked to do
  remote_error,         ///< an exception was thrown in another process
  timeout,              ///< a wait with a deadline expired
  not_started,          ///< an operation needs a started process
  already_started,      ///< start() called twice
  closed,               ///< the object was closed
  wrong_direction,      ///< send on a receive-only pipe end, or the reverse
  would_deadlock,       ///< a blocking call was made from the thread that runs fiber's event loop
  backend_unavailable,  ///< the configured backend/engine cannot be reached
  server_lost,          ///< a manager's server process ended: its objects are gone
  member_lost,          ///< a member of a ring ended with an error: the ring cannot go on
  unsatisfiable,        ///< a child asks for more (CPUs, memory, GPUs) than any node of the backend has
  timed_out,            ///< a pool item ran longer than its task_timeout: its worker was killed
  cancelled,            ///< the operation was cancelled before it finished
  shared_cache_full,    ///< a fiber::shared object would take the shared objects in use past shared_cache_bytes
  too_deep,             ///< a child would be deeper in the job's tree of processes than max_depth allows
  maker_gone,           ///< the process that made a queue or pipe has ended: the queue or pipe ended with it
  journal_failed,       ///< a durable run's journal could not be written (past journal_max_bytes, or the disk refused)
  memory_exceeded,      ///< a pool item's worker was stopped for going past its memory limit (memory_mb)
};

}  // namespace fiber

/// @cond internal
template <>
struct std::is_error_code_enum<fiber::errc> : std::true_type {};
/// @endcond

namespace fiber {

/// The category of fiber's error codes (named "fiber").
FIBER_API const std::error_category& fiber_category() noexcept;

/// `e` as a std::error_code of fiber_category().
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), fiber_category()};
}

/// Thrown by blocking calls and by `co_await` on failed operations.
class FIBER_API error : public std::system_error {
 public:
  /// An error with fiber's `code` and the reason `what`.
  error(errc code, const std::string& what) : std::system_error(make_error_code(code), what) {}
  /// An error with any `code` (an operating system's, Asio's) and the reason `what`.
  error(std::error_code code, const std::string& what) : std::system_error(code, what) {}
  /// what() without the code's words that std::system_error appends: the reason alone, for
  /// errors that wrap this one.
  std::string reason() const;
};

/// An exception thrown by user code in another process: its type and message travel back.
class FIBER_API remote_error : public error {
 public:
  /// `item`: the pool item whose call raised it ("item 7 (train)"), empty outside a pool.
  remote_error(std::string type, std::string message, std::string where, std::string item = {})
      : error(errc::remote_error, type + ": " + message + " (raised in " + (item.empty() ? "" : item + " on ") +
                                      where + ")"),
        type_(std::move(type)), message_(std::move(message)), where_(std::move(where)), item_(std::move(item)) {}
  /// The exception's type as the other process named it (its demangled name).
  const std::string& type() const noexcept { return type_; }
  /// The exception's what().
  const std::string& message() const noexcept { return message_; }
  /// Name of the process the exception was raised in.
  const std::string& where() const noexcept { return where_; }
  /// The pool item whose call raised it, as "item 7 (train)"; empty for a process or a manager.
  const std::string& item() const noexcept { return item_; }

 private:
  std::string type_, message_, where_, item_;
};

}  // namespace fiber

