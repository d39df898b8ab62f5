#include "runtime/idle_trim.hpp"

#include <asio/post.hpp>

#include <memory>
#include <mutex>
#include <utility>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace fiber::detail {

void give_back_freed_memory() noexcept {
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
}

// The timer and the count, shared with the holds and the handlers posted for them: a hold may
// be dropped on any thread, and everything else happens on the loop. Work coming and going costs
// an atomic count and a clock read: the timer is armed once per idle spell (not per call), and
// when it fires it looks at how long the process has been idle, trimming or waiting the rest.
struct idle_trim::hold::state {
  state(asio::io_context& io, std::chrono::milliseconds d, std::function<void()> t)
      : timer(io), delay(d), trim(std::move(t)) {}
  using clock = std::chrono::steady_clock;
  asio::steady_timer timer;
  std::chrono::milliseconds delay;
  std::function<void()> trim;
  std::atomic<std::size_t> busy{0};
  std::atomic<clock::rep> idle_since{0};
  std::atomic<bool> armed{false};
  std::atomic<bool> stopped{false};
  std::atomic<std::uint64_t> trims{0};

  /// Arms the timer unless it is armed (from any thread: the wait is posted to the loop).
  void arm_soon(const std::shared_ptr<state>& self) {
    if (stopped.load() || armed.exchange(true)) return;
    try {
      asio::post(timer.get_executor(), [w = std::weak_ptr<state>(self)] {
        if (auto s = w.lock()) s->wait(w, s->delay);
      });
    } catch (...) {
      armed = false;  // the loop is gone with its process's work: nothing to give back
    }
  }
  /// On the loop.
  void wait(const std::weak_ptr<state>& self, clock::duration d) {
    timer.expires_after(d);
    timer.async_wait([self](std::error_code ec) {
      auto s = self.lock();
      if (!s) return;
      if (ec || s->stopped.load()) {
        s->armed = false;
        return;
      }
      s->fired(self);
    });
  }
  void fired(const std::weak_ptr<state>& self) {
    if (busy.load() != 0) {
      armed = false;
      // Idle again since the load above: that release saw the timer armed and armed nothing.
      if (busy.load() == 0) arm_soon(self.lock());
      return;
    }
    auto idle_for = clock::now() - clock::time_point(clock::duration(idle_since.load()));
    if (idle_for < delay) return wait(self, delay - idle_for);
    armed = false;
    trim();
    trims.fetch_add(1);
  }
};

idle_trim::idle_trim(asio::io_context& io, std::chrono::milliseconds delay, std::function<void()> trim)
    : s_(std::make_shared<hold::state>(io, delay, std::move(trim))) {}

idle_trim::hold idle_trim::busy() {
  if (s_->delay.count() <= 0 || s_->stopped.load()) return {};
  s_->busy.fetch_add(1);
  return hold(s_);
}

void idle_trim::hold::release() noexcept {
  auto s = std::exchange(s_, {}).lock();
  if (!s || s->busy.fetch_sub(1) != 1) return;
  s->idle_since = state::clock::now().time_since_epoch().count();
  s->arm_soon(s);
}

void idle_trim::stop() noexcept {
  s_->stopped = true;
  try {
    asio::post(s_->timer.get_executor(), [w = std::weak_ptr<hold::state>(s_)] {
      if (auto s = w.lock()) s->timer.cancel();
    });
  } catch (...) {
  }
}

std::uint64_t idle_trim::trims() const noexcept { return s_->trims.load(); }

namespace {
// The io_context's trimmer, as Asio keeps a service per execution context.
class idle_trim_service final : public asio::execution_context::service {
 public:
  static inline asio::execution_context::id id;
  explicit idle_trim_service(asio::execution_context& ctx) : service(ctx) {}
  idle_trim& get(asio::io_context& io, std::chrono::milliseconds delay) {
    std::lock_guard lock(mutex_);
    if (!trim_) trim_ = std::make_unique<idle_trim>(io, delay);
    return *trim_;
  }

 private:
  void shutdown() override { trim_.reset(); }
  std::mutex mutex_;
  std::unique_ptr<idle_trim> trim_;
};
}  // namespace

idle_trim& idle_trim::of(asio::io_context& io, std::chrono::milliseconds delay) {
  return asio::use_service<idle_trim_service>(io).get(io, delay);
}

}  // namespace fiber::detail
