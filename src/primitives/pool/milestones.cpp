#include "primitives/pool/milestones.hpp"

namespace fiber::detail {

void milestones::when_ready(unique_function<void()> done) {
  ready_waiters_.push_back(std::move(done));
  if (ready_()) release(ready_waiters_);
}

void milestones::when_joined(unique_function<void()> done) {
  joined_waiters_.push_back(std::move(done));
  if (joined_()) release(joined_waiters_);
}

void milestones::check() {
  if (!ready_waiters_.empty() && ready_()) release(ready_waiters_);
  if (!joined_waiters_.empty() && joined_()) release(joined_waiters_);
}

void milestones::release(std::vector<unique_function<void()>>& waiters) {
  auto now = std::move(waiters);
  waiters.clear();
  for (auto& f : now) f();
}

}  // namespace fiber::detail
