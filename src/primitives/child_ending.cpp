#include "primitives/child_ending.hpp"

#include <csignal>

#include "core/log.hpp"
#include "core/remote_failure.hpp"

namespace fiber::detail {

void child_ending::heard_done(bool threw, const std::string& detail, const std::string& name) {
  done_heard_ = true;
  if (!threw) return;
  auto f = remote_failure::decode(detail);
  if (f.in_fiber) logf(log_level::warn, name, " reported its end in an unreadable form: ", f.message);
  raised_.emplace(f.in_fiber ? "fiber::error" : f.type, f.message, name);
}

void child_ending::killed(std::string why) noexcept {
  ended_by_ = std::move(why);
  exited(-SIGKILL);
}

void child_ending::when_ended(unique_function<void()> f) {
  if (ended_) return f();
  waiters_.push_back(std::move(f));
}

std::vector<unique_function<void()>> child_ending::end() {
  if (ended_.exchange(true)) return {};
  auto waiters = std::move(waiters_);
  waiters_.clear();
  return waiters;
}

}  // namespace fiber::detail
