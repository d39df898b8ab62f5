// How a child's start completes, once: the handler start() was given, called on the loop with no
// error once the child passed its handshake, else with why not; and the handshake's deadline,
// armed once the child runs (a scheduler's queue wait is not the child's fault). On fiber's loop.
#pragma once
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <system_error>

#include "fiber/detail/unique_function.hpp"

namespace fiber::detail {

class child_start_gate {
 public:
  using handler = unique_function<void(std::error_code, std::string)>;

  void open(handler h) { handler_ = std::move(h); }
  /// Whether the start has not completed yet.
  bool waiting() const noexcept { return static_cast<bool>(handler_); }
  /// The deadline: `fired` runs on the loop after `limit` (with operation_aborted once the start
  /// completed first). It must hold its owner weakly: the gate may be gone by then.
  void arm(asio::io_context& io, std::chrono::milliseconds limit, unique_function<void(std::error_code)> fired);
  /// The start completes with `ec` (none: it passed its handshake); later calls do nothing.
  void complete(std::error_code ec, std::string detail);

 private:
  handler handler_;
  std::unique_ptr<asio::steady_timer> timer_;
};

}  // namespace fiber::detail
