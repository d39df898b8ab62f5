// The one way a blocking caller runs an io_context of its own until its answer is in: the
// engines' blocking clients (blocking_engine, blocking_api) and the `fiber` command's waits.
#pragma once
#include <asio/io_context.hpp>

namespace fiber::detail {

/// Runs `io` on this thread, one handler at a time, until `done()` holds. False when `io` ran out
/// of work first (nothing left that could make it hold).
template <class Done>
bool run_until(asio::io_context& io, Done&& done) {
  io.restart();
  while (!done())
    if (!io.run_one()) return false;
  return true;
}

/// Runs the handlers that are ready now, without waiting: after a cancel, so that the cancelled
/// operations' handlers run while what they reference is still there.
inline void run_ready(asio::io_context& io) {
  io.restart();
  io.poll();
}

}  // namespace fiber::detail
