#include "runtime/observe/memory_sampler.hpp"

namespace fiber::detail {

void memory_sampler::start() {
  if (stopped_) return;
  if (!timer_) timer_.emplace(io_);
  arm();
}

void memory_sampler::arm() {
  if (stopped_ || !timer_) return;
  timer_->expires_after(every_);
  // Cancelled by stop(): `this` is touched only when the wait ran out.
  timer_->async_wait([this](std::error_code ec) {
    if (ec || stopped_) return;
    if (sleeps_ && !worked_) {
      dormant_ = true;  // nothing since the last sample: the next work wakes it
      return;
    }
    worked_ = false;
    sample_();
    arm();
  });
}

void memory_sampler::stop() noexcept {
  stopped_ = true;
  dormant_ = false;
  if (timer_) timer_->cancel();
}

}  // namespace fiber::detail
