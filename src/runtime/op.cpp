// What fiber::op (include/fiber/op.hpp) and deferred_op ask of the runtime: its executor, and
// waiting on the calling thread while the loop runs (or running it there).
#include "fiber/error.hpp"
#include "fiber/op.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {

asio::any_io_executor executor_of(runtime& rt) noexcept { return rt.executor(); }
bool in_loop_thread(runtime& rt) noexcept { return rt.in_loop_thread(); }
void wait_until(runtime& rt, const std::atomic<bool>& done) { rt.wait_until(done); }
void notify_done(runtime& rt, std::atomic<bool>& done) noexcept { rt.notify_done(done); }
void wait_until_started(runtime& rt, unique_function<void()> start, const std::atomic<bool>& done) {
  rt.drive(std::move(start), done);
}

void throw_would_deadlock() {
  throw error(errc::would_deadlock,
              "a blocking .get() was called on the thread that runs fiber's io_context; it would wait for "
              "itself: co_await the operation instead");
}

}  // namespace fiber::detail
