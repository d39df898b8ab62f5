// Who waits for a pool's two milestones: ready (its workers connected, or they cannot start, or
// it closed) and joined (closed, and every worker gone). The conditions are the pool's, asked at
// each check; each waiter is called once, when its milestone is reached (at once if it was), and
// a wait begun from inside a waiter's call is a new one (met at once while the milestone holds).
// No process, no loop.
#pragma once
#include <vector>

#include "fiber/detail/unique_function.hpp"

namespace fiber::detail {

class milestones {
 public:
  using condition = unique_function<bool()>;
  milestones(condition ready, condition joined) : ready_(std::move(ready)), joined_(std::move(joined)) {}

  void when_ready(unique_function<void()> done);
  void when_joined(unique_function<void()> done);
  /// Calls the waiters of each milestone now reached.
  void check();

 private:
  static void release(std::vector<unique_function<void()>>& waiters);

  condition ready_, joined_;
  std::vector<unique_function<void()>> ready_waiters_, joined_waiters_;
};

}  // namespace fiber::detail
