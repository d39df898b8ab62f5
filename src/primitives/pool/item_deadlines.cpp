#include "primitives/pool/item_deadlines.hpp"

namespace fiber::detail {

void item_deadlines::use() {
  if (!timer_) timer_ = std::make_shared<asio::steady_timer>(io_);
}

void item_deadlines::watch(std::optional<clock::time_point> when) {
  if (timer_ && when && (!armed_ || *when < *armed_)) arm(*when);
}

void item_deadlines::cancel() noexcept {
  if (timer_) timer_->cancel();
  armed_.reset();
}

void item_deadlines::arm(clock::time_point when) {
  armed_ = when;
  timer_->expires_at(when);  // cancels the wait for a later one
  timer_->async_wait([this, alive = std::weak_ptr<bool>(alive_)](std::error_code ec) {
    if (ec || alive.expired()) return;
    armed_.reset();
    // What due() started may have set an earlier one already: the next is only watched.
    watch(due_());
  });
}

}  // namespace fiber::detail
