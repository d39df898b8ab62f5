#include "runtime/end_holds.hpp"

#include "core/log.hpp"

namespace fiber::detail {

std::uint64_t end_holds::hold(std::shared_ptr<void> what, std::string name) {
  auto id = ++next_;
  held_.emplace(id, std::make_pair(std::move(what), std::move(name)));
  none_held_ = false;
  return id;
}

void end_holds::let_go(std::uint64_t id) {
  held_.erase(id);
  if (held_.empty()) loop_.notify_done(none_held_);
}

void end_holds::wait() {
  if (none_held_) return;
  // A caller's io_context runs only when its owner runs it, and the loop's own thread cannot wait
  // for itself: what is held ends with the context instead.
  if (!loop_.owns_loop() || loop_.in_loop_thread()) return;
  std::string names;
  loop_.run_sync([&] {
    for (auto& [id, held] : held_) names += (names.empty() ? "" : ", ") + held.second;
  });
  if (names.empty()) return;
  logf(log_level::warn, "waiting for process(es) ", names,
       " to end before the context ends, as multiprocessing waits for non-daemon children "
       "(join() them, or set_daemon(true) to have them killed instead)");
  loop_.wait_until(none_held_);
}

}  // namespace fiber::detail
