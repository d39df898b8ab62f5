#include "runtime/links/link_pulse.hpp"

#include <poll.h>

#include <optional>

#include "core/log.hpp"
#include "runtime/protocol.hpp"

namespace fiber::detail {

link_pulse::link_pulse(std::shared_ptr<stream_link> link, std::chrono::milliseconds interval,
                       std::chrono::milliseconds silence, unique_function<void()> master_lost)
    : link_(std::move(link)),
      interval_ms_(interval.count()),
      silence_ms_(silence.count()),
      master_lost_(std::move(master_lost)),
      thread_([this] { run(); }) {}

void link_pulse::retune(std::chrono::milliseconds interval, std::chrono::milliseconds silence) noexcept {
  {
    std::lock_guard lock(mutex_);
    interval_ms_ = interval.count();
    silence_ms_ = silence.count();
  }
  wake_.notify_all();
}

link_pulse::~link_pulse() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void link_pulse::run() {
  const auto pulse = make_message(kind::probe, {});
  const int fd = link_->socket().native_handle();
  // Since when the master hung up; the epoch while it has not (an optional here made GCC warn
  // of an uninitialized read that cannot happen).
  stream_link::clock::time_point hung_up_since{};
  std::unique_lock lock(mutex_);
  for (;;) {
    auto interval = std::chrono::milliseconds(interval_ms_.load());
    auto silence = std::chrono::milliseconds(silence_ms_.load());
    // Woken early to stop, or by a retune: then this interval is the new one.
    if (wake_.wait_for(lock, interval, [&] { return stopping_ || interval_ms_.load() != interval.count(); })) {
      if (stopping_) return;
      continue;
    }
    auto now = stream_link::clock::now();
    if (now - link_->last_sent() >= interval && !link_->send_pulse(pulse, silence)) {
      logf(log_level::error, "the master took nothing this worker sent for heartbeat_timeout_ms (", silence.count(),
           " ms): it is gone; exiting");
      return master_lost_();
    }
    pollfd p{fd, POLLRDHUP, 0};
    bool hung_up = ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
    if (!hung_up) {
      hung_up_since = {};
    } else if (hung_up_since == stream_link::clock::time_point{}) {
      hung_up_since = now;  // an idle worker reads the rest and the end itself
    } else if (now - hung_up_since >= 2 * interval) {
      logf(log_level::error, "the master closed its link while this worker ran a task: it is gone; exiting");
      return master_lost_();
    }
  }
}

}  // namespace fiber::detail
