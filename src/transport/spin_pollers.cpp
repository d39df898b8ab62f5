#include "transport/spin_pollers.hpp"

#include <algorithm>

namespace fiber::detail {

void spin_pollers::add(const std::shared_ptr<poller>& p) {
  std::lock_guard lock(mutex_);
  std::erase_if(pollers_, [](auto& w) { return w.expired(); });
  pollers_.push_back(p);
}

bool spin_pollers::begin() {
  if (!spinning_.empty()) return true;  // awake since the last spin
  {
    std::lock_guard lock(mutex_);
    spinning_.clear();
    for (auto& w : pollers_) {
      if (spinning_.size() == most_polled) break;
      if (auto p = w.lock()) spinning_.push_back(std::move(p));
    }
  }
  for (auto& p : spinning_) p->awake();
  return !spinning_.empty();
}

bool spin_pollers::poll() {
  bool ran = false;
  for (auto& p : spinning_) ran |= p->poll();
  return ran;
}

void spin_pollers::sleep() noexcept {
  for (auto& p : spinning_) p->asleep();
  spinning_.clear();
}

std::size_t spin_pollers::size() {
  std::lock_guard lock(mutex_);
  return pollers_.size();
}

void spin_pollers::shutdown() {
  std::lock_guard lock(mutex_);
  spinning_.clear();
  pollers_.clear();
}

}  // namespace fiber::detail
