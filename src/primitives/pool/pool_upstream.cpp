#include "primitives/pool/pool_upstream.hpp"

#include <boost/json/serialize.hpp>

namespace fiber::detail {

pool_upstream::~pool_upstream() {
  if (timer_) send_(last_, /*ended=*/true);
}

void pool_upstream::start(std::weak_ptr<void> owner, describe_fn describe) {
  owner_ = std::move(owner);
  describe_ = std::move(describe);
  timer_ = std::make_unique<asio::steady_timer>(io_);
  every();
}

void pool_upstream::show() {
  if (!timer_) return;
  last_ = boost::json::serialize(describe_());
  send_(last_, false);
}

void pool_upstream::every() {
  show();
  timer_->expires_after(interval_);
  timer_->async_wait([this, owner = owner_](std::error_code ec) {
    if (auto alive = owner.lock(); alive && !ec) every();
  });
}

}  // namespace fiber::detail
