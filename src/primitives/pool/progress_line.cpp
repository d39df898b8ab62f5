#include "primitives/pool/progress_line.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace fiber::detail {

void progress_line::start(asio::io_context& io, const std::weak_ptr<void>& owner) {
  if (!enabled_ || timer_ || !::isatty(STDERR_FILENO)) return;
  timer_ = std::make_unique<asio::steady_timer>(io);
  tick(owner);
}

void progress_line::cancel() noexcept {
  if (timer_) timer_->cancel();
}

void progress_line::tick(const std::weak_ptr<void>& owner) {
  timer_->expires_after(std::chrono::milliseconds(200));
  timer_->async_wait([owner, this](std::error_code ec) {
    auto alive = owner.lock();
    if (ec || !alive) return;
    auto f = render_();
    if (!f) return;
    std::fprintf(stderr, "\r%s\033[K", f->text.c_str());
    if (!f->last) {
      tick(owner);
    } else {
      std::fputc('\n', stderr);
      timer_.reset();
    }
  });
}

}  // namespace fiber::detail
