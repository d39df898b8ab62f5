/// @file
/// The runtime: event loop, configuration, job identity, backend.
#pragma once
#include <asio/any_io_executor.hpp>
#include <memory>
#include <string>
#include <vector>

#include "fiber/config.hpp"
#include "fiber/detail/export.hpp"

namespace asio {
class io_context;
}

namespace fiber {
namespace detail {
class runtime;
}

/// Runs fiber on an event loop. Either owns an io_context and a thread that runs it (plain
/// programs), or runs on the caller's io_context (services with their own event loop: the
/// caller keeps it running, and must not block its thread with `.get()`).
class FIBER_API context {
 public:
  /// A context with an event loop and a thread of its own, configured by `cfg`.
  explicit context(fiber::config cfg = config::load());
  /// A context on the caller's `io`, which the caller keeps running.
  explicit context(asio::io_context& io, fiber::config cfg = config::load());
  ~context();
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  /// Ends children still running and closes fiber's sockets, so that an embedding service's
  /// io_context runs out of fiber's work. Idempotent; the destructor calls it. With an external
  /// io_context, call it on that io_context's thread (or after it stopped).
  void stop() noexcept;

  /// The configuration this context runs with.
  const fiber::config& config() const noexcept;
  /// The executor of the event loop that drives fiber's channels, timers and engine calls.
  asio::any_io_executor get_executor() const noexcept;
  /// The endpoints this process listens on for its children (empty before the first child).
  std::vector<std::string> endpoints() const;
  /// Identity of this job; children share it.
  const std::string& job_id() const noexcept;
  /// The address of the run's live page, with its token (config dashboard; printed to stderr
  /// when the context starts); empty when it is off, and in a child.
  std::string dashboard_url() const;

  /// The context of this process: in a worker, the one its master configured; otherwise one
  /// made on first use from fiber::init's overrides, the environment and .fiberconfig.
  static context& default_context();

  /// @cond internal
  std::shared_ptr<detail::runtime> runtime() const noexcept { return rt_; }
  /// @endcond

 private:
  explicit context(std::shared_ptr<detail::runtime> rt) noexcept;
  std::shared_ptr<detail::runtime> rt_;
};

/// First line of main(). In a process started as a worker it runs the worker and exits: it
/// never returns into main. Otherwise it records `overrides` (highest precedence) for the
/// default context.
FIBER_API void init(int argc, char** argv, config_overrides overrides = {});

/// True in a process started by fiber as a child.
FIBER_API bool is_worker() noexcept;

}  // namespace fiber
