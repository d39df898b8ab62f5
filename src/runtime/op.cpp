// What fiber::op (include/fiber/op.hpp) and deferred_op ask of the runtime: its executor, and
// waiting on the calling thread while the loop runs (or running it there).
#include "fiber/error.hpp"
#include "fiber/log.hpp"
#include "fiber/op.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {

asio::any_io_executor executor_of(runtime& rt) noexcept { return rt.loop().executor(); }
bool in_loop_thread(runtime& rt) noexcept { return rt.loop().in_loop_thread(); }
void wait_until(runtime& rt, const std::atomic<bool>& done) { rt.loop().wait_until(done); }
void notify_done(runtime& rt, std::atomic<bool>& done) noexcept { rt.loop().notify_done(done); }
void wait_until_started(runtime& rt, unique_function<void()> start, const std::atomic<bool>& done) {
  rt.loop().drive(std::move(start), done);
}

void report_dropped_op(const char* made_by) noexcept {
  try {
    // "fiber::op<void> fiber::simple_queue<T>::put(T) [with T = int]" -> "fiber::simple_queue<T>::put".
    // Clang spells an anonymous namespace "(anonymous namespace)", GCC "{anonymous}": its
    // parenthesis is not the parameter list's.
    std::string spelled(made_by);
    for (std::size_t at; (at = spelled.find("(anonymous namespace)")) != std::string::npos;)
      spelled.replace(at, std::string_view("(anonymous namespace)").size(), "{anonymous}");
    std::string_view name(spelled);
    if (auto paren = name.find('('); paren != std::string_view::npos) name = name.substr(0, paren);
    int depth = 0;
    std::size_t start = 0;
    for (std::size_t i = 0; i < name.size(); ++i) {
      if (name[i] == '<') ++depth;
      else if (name[i] == '>') --depth;
      else if (name[i] == ' ' && depth == 0) start = i + 1;
    }
    name = name.substr(start);
    fiber::log(log_level::warn, "an operation of " + std::string(name) +
                             " was dropped before it was awaited or waited for, so it never ran: co_await it or call "
                             ".get() on it (fiber's operations start when awaited; the _async forms start at once)");
  } catch (...) {
  }
}

void throw_would_deadlock() {
  throw error(errc::would_deadlock,
              "a blocking .get() was called on the thread that runs fiber's io_context; it would wait for "
              "itself: co_await the operation instead");
}

}  // namespace fiber::detail
