#include "runtime/event_loop.hpp"

#include <asio/post.hpp>
#include <utility>
#include <sched.h>

#include "core/log.hpp"
#include "fiber/error.hpp"
#include "transport/spin_pollers.hpp"

namespace fiber::detail {

event_loop::event_loop(asio::io_context* external, bool standby, std::chrono::microseconds spin) : spin_(spin) {
  if (external) {
    io_ = external;
    return;
  }
  owned_io_ = std::make_unique<asio::io_context>(1);
  io_ = owned_io_.get();
  self_driven_ = true;
  work_.emplace(io_->get_executor());
  if (standby) standby_ = std::thread([this] { standby_loop(); });
}

void event_loop::start_standby() {
  if (!owned_io_ || standby_.joinable()) return;
  standby_ = std::thread([this] { standby_loop(); });
}

event_loop::~event_loop() {
  stop([] {});
}

void event_loop::stop(unique_function<void()> last) noexcept {
  if (!standby_.joinable()) {
    if (last) last();
    work_.reset();
    return;
  }
  if (in_loop_thread()) {
    last();
  } else {
    try {
      run_sync([&] { last(); });
    } catch (...) {
      last();  // the loop is gone: nothing else runs it
    }
  }
  {
    std::lock_guard lock(wait_mutex_);
    stopping_ = true;
  }
  standby_cv_.notify_all();
  work_.reset();
  io_->stop();  // wakes a standby blocked in run_one
  if (std::this_thread::get_id() == standby_.get_id())
    standby_.detach();  // last reference dropped by a handler on the standby itself
  else
    standby_.join();
}

bool event_loop::in_loop_thread() const noexcept { return io_->get_executor().running_in_this_thread(); }

// How long the standby thread leaves the loop to callers after the last one let go of it: a
// caller that blocks again within this time drives the loop without waking another thread.
static constexpr auto standby_linger = std::chrono::milliseconds(1);
// While callers drive, the standby looks again this often; callers never wake it (that would
// cost a cross-core wake-up on every blocking call).
static constexpr auto standby_recheck = std::chrono::milliseconds(2);

bool event_loop::run_one_logged(bool block) noexcept {
  try {
    // Links polled in a spin must have their doorbells rung again before this thread sleeps.
    if (block && pollers_ && pollers_->awake()) pollers_->sleep();
    return (block ? io_->run_one() : io_->poll_one()) != 0;
  } catch (const std::exception& e) {
    // A handler let an exception escape (a detached coroutine that threw). It is nobody's
    // operation in particular, and the loop must go on serving the others.
    logf(log_level::error, "exception escaped a handler on fiber's event loop: ", e.what());
  } catch (...) {
    logf(log_level::error, "exception escaped a handler on fiber's event loop");
  }
  return true;
}

// Polls before sleeping: on a machine whose idle cores sleep (a VM's vCPUs above all), waking a
// process costs more than the round trip it waits for, so an answer that comes within the spin
// is taken without either side sleeping (docs/design.md, "Who runs the event loop"). Each
// empty poll yields the core, so a process that shares it runs meanwhile.
//
// Spinning pays only when the answer comes within it. When it keeps not coming (a worker of a
// pool of a thousand on two cores: its next task comes milliseconds later), the spinners fill
// the run queue ahead of the processes that have work, and everything slows (at 1,024 Slurm
// workers, 40 µs a task without spinning, 58 with). So after `spin_misses_allowed` spins in a
// row that ended empty-handed the loop sleeps at once, and spins again once in
// `spin_probe_every` waits to find out whether answers have become quick again.
namespace {
// What run_one_logged does for a handler, for the work a poller runs (a message's handlers).
bool poll_logged(spin_pollers& pollers) noexcept {
  try {
    return pollers.poll();
  } catch (const std::exception& e) {
    logf(log_level::error, "exception escaped a handler on fiber's event loop: ", e.what());
  } catch (...) {
    logf(log_level::error, "exception escaped a handler on fiber's event loop");
  }
  return true;
}
}  // namespace

template <class Done>
bool event_loop::run_until(Done is_done) {
  bool spin = spin_.count() > 0 && !is_done() &&
              (spin_misses_ < spin_misses_allowed || ++waits_without_spin_ % spin_probe_every == 0);
  if (spin) {
    // Links through shared memory are polled beside the io_context, their peers told not to ring
    // this side meanwhile (transport/spin_pollers); told again before anything blocks on it.
    if (!pollers_ && asio::has_service<spin_pollers>(*io_)) pollers_ = &asio::use_service<spin_pollers>(*io_);
    spin_pollers* pollers = pollers_ && pollers_->begin() ? pollers_ : nullptr;
    auto until = std::chrono::steady_clock::now() + spin_;
    bool hit = false;
    for (;;) {
      if (is_done()) {
        hit = true;
        break;
      }
      if (io_->stopped()) return false;
      if (run_one_logged(/*block=*/false)) continue;
      if (pollers && poll_logged(*pollers)) continue;
      if (std::chrono::steady_clock::now() >= until) break;
      sched_yield();
    }
    if (hit) {
      spin_misses_ = 0;
      waits_without_spin_ = 0;
      return true;
    }
    if (spin_misses_ < spin_misses_allowed) ++spin_misses_;
  }
  while (!is_done())
    if (!run_one_logged()) return false;
  return true;
}

void event_loop::standby_loop() {
  std::unique_lock lock(wait_mutex_);
  // A caller let go of the loop since the standby last looked: it leaves the loop alone for a
  // linger more. Counting releases rather than timing them keeps the clock off every caller's
  // path (a clock read was a twentieth of a blocking operation).
  std::uint64_t seen = releases_;
  while (!stopping_) {
    if (driving_ || want_to_drive_ > 0) {
      standby_cv_.wait_for(lock, standby_recheck);
      continue;
    }
    if (releases_ != seen) {
      seen = releases_;
      standby_cv_.wait_for(lock, standby_linger);
      continue;
    }
    driving_ = standby_driving_ = true;
    lock.unlock();
    run_one_logged();
    lock.lock();
    driving_ = standby_driving_ = false;
    kicked_ = false;
    if (want_to_drive_ > 0) wait_cv_.notify_all();
  }
}

void event_loop::notify_done(std::atomic<bool>& done) noexcept {
  {
    std::lock_guard lock(wait_mutex_);
    done.store(true, std::memory_order_release);
  }
  wait_cv_.notify_all();
}

void event_loop::drive(unique_function<void()> start, const std::atomic<bool>& done) {
  auto is_done = [&] { return done.load(std::memory_order_acquire); };
  if (!self_driven_) {
    if (start) run_sync(std::move(start));
    std::unique_lock lock(wait_mutex_);
    wait_cv_.wait(lock, is_done);
    return;
  }
  std::unique_lock lock(wait_mutex_);
  // Set when `start` was handed to the caller that drives and threw there (made only then).
  std::shared_ptr<std::exception_ptr> handed;
  ++want_to_drive_;
  for (;;) {
    if (handed && *handed) {
      --want_to_drive_;
      std::rethrow_exception(*handed);
    }
    if (!start && is_done()) break;
    if (driving_ && !standby_driving_ && start) {
      // Another caller holds the loop until its own operation is done, which may wait for ours
      // (a get for what this put sends): the loop runs our start, we wait for our end.
      handed = std::make_shared<std::exception_ptr>();
      asio::post(*io_, [this, f = std::move(start), handed]() mutable {
        try {
          f();
        } catch (...) {
          {
            std::lock_guard failed(wait_mutex_);
            *handed = std::current_exception();
          }
          wait_cv_.notify_all();
        }
      });
      start = nullptr;
      continue;
    }
    if (!driving_) {
      // Take the loop and run it until our own operation completes; others wait for us.
      driving_ = true;
      driver_.store(std::this_thread::get_id(), std::memory_order_relaxed);
      --want_to_drive_;
      lock.unlock();
      std::exception_ptr failure;
      bool stopped = false;
      try {
        if (start) {
          auto f = std::exchange(start, nullptr);
          f();  // the caller's own operation: its exceptions are the caller's
        }
      } catch (...) {
        failure = std::current_exception();
      }
      if (!failure) stopped = !run_until(is_done);
      lock.lock();
      driver_.store(std::thread::id{}, std::memory_order_relaxed);
      driving_ = false;
      ++releases_;
      if (want_to_drive_ > 0) wait_cv_.notify_all();  // another caller takes the loop
      if (failure) std::rethrow_exception(failure);
      if (is_done()) return;
      if (stopped) throw error(errc::closed, "fiber's event loop has stopped");
      ++want_to_drive_;
      continue;
    }
    if (standby_driving_ && !kicked_) {
      kicked_ = true;
      asio::post(*io_, [] {});  // makes the standby's run_one return and hand over
    }
    wait_cv_.wait(lock);
  }
  --want_to_drive_;
}

void event_loop::run_sync(unique_function<void()> f) {
  if (in_loop_thread()) {
    f();
    return;
  }
  std::atomic<bool> done{false};
  std::exception_ptr failure;
  asio::post(*io_, [&] {
    try {
      f();
    } catch (...) {
      failure = std::current_exception();
    }
    notify_done(done);
  });
  wait_until(done);
  if (failure) std::rethrow_exception(failure);
}

void event_loop::run_or_post(unique_function<void()> f) {
  if (in_loop_thread() || owned_io_) {
    run_sync(std::move(f));
    return;
  }
  asio::post(*io_, std::move(f));
}

}  // namespace fiber::detail
