#include "primitives/pool/drain_notice.hpp"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "core/log.hpp"
#include "fiber/planned_end.hpp"
#include "core/worker_env.hpp"
#include "runtime/worker_exit.hpp"

namespace fiber::detail {

namespace {
std::atomic<drain_notice*> armed{nullptr};
std::atomic<pid_t> parent_pid{0};
std::atomic<bool> term_notice{true};

std::int64_t monotonic_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe, and steady_clock's own on Linux
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

drain_notice::clock::duration from_ns(std::int64_t ns) {
  return std::chrono::duration_cast<drain_notice::clock::duration>(std::chrono::nanoseconds(ns));
}
}  // namespace

drain_notice::clock::duration drain_notice::margin(clock::duration notice) {
  return std::min<clock::duration>(notice / 10, std::chrono::seconds(2));
}

drain_notice::verdict drain_notice::decide(clock::duration notice, clock::duration estimate, clock::duration since) {
  auto usable = notice - margin(notice);
  if (since >= usable) return {.hand_back_now = true};
  // An item known to need more than is left is handed back while the replacement can still use
  // the notice; an unknown one may finish, and is handed back only once the notice is nearly out.
  if (estimate > clock::duration::zero() && since + estimate > usable) return {.hand_back_now = true};
  return {.hand_back_now = false, .wait_until_ago = usable};
}

drain_notice& drain_notice::arm(std::chrono::milliseconds notice, pid_t parent, bool term_is_notice,
                                unique_function<void()> wake) {
  if (auto* d = armed.load()) return *d;
  auto* d = new drain_notice();  // the process's for its life: its handler and its thread use it
  d->notice_ = notice;
  d->wake_ = std::move(wake);
  if (notice.count() <= 0) {  // none asked for: an engine's end kills the worker, from outside
    armed = d;
    return *d;
  }
  if (::pipe2(d->pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    logf(log_level::warn, "no notice of this worker's planned end (pipe: ", std::strerror(errno), "): it ends as killed");
    armed = d;
    return *d;
  }
  ::fcntl(d->pipe_[0], F_SETFL, 0);  // the watch blocks on its end
  parent_pid = parent;
  term_notice = term_is_notice;
  armed = d;
  std::thread([d] { d->watch(); }).detach();
  struct sigaction sa {};
  sa.sa_sigaction = &drain_notice::on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;  // the item's own calls go on where the signal found them
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGURG}) ::sigaction(sig, &sa, nullptr);
  return *d;
}

void drain_notice::on_signal(int sig, siginfo_t* info, void*) noexcept {
  int saved = errno;
  auto* d = armed.load();
  bool from_parent = info && info->si_code == SI_USER && parent_pid.load() != 0 && info->si_pid == parent_pid.load();
  if (sig == SIGTERM && (!term_notice.load() || from_parent)) {
    // The pool stopping its worker, or a cancellation: as without a handler (it is blocked until
    // this returns).
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGTERM, &dfl, nullptr);
    ::raise(SIGTERM);
    errno = saved;
    return;
  }
  if (d && !d->given_.exchange(true)) {
    d->given_at_ns_ = monotonic_ns();
    d->signal_ = sig;
    char byte = 1;
    [[maybe_unused]] auto n = ::write(d->pipe_[1], &byte, 1);
  }
  errno = saved;
}

void drain_notice::task_begins(std::chrono::milliseconds estimate) noexcept {
  estimate_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(estimate).count(), std::memory_order_relaxed);
  in_task_.store(0, std::memory_order_relaxed);
  task_began_ns_.store(monotonic_ns(), std::memory_order_release);
}

void drain_notice::task_ends() noexcept {
  auto began = task_began_ns_.exchange(0, std::memory_order_acq_rel);
  if (!began) return;
  busy_ns_.fetch_add(monotonic_ns() - began, std::memory_order_relaxed);
  items_.fetch_add(in_task_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

drain_notice::clock::duration drain_notice::learned() const noexcept {
  auto busy = busy_ns_.load(std::memory_order_relaxed);
  auto items = items_.load(std::memory_order_relaxed);
  // The running task's finished items count too: a first chunk teaches its own later items.
  if (auto began = task_began_ns_.load(std::memory_order_acquire); began) {
    if (auto done = in_task_.load(std::memory_order_relaxed); done) {
      busy += monotonic_ns() - began;
      items += done;
    }
  }
  return items ? from_ns(busy / static_cast<std::int64_t>(items)) : clock::duration::zero();
}

void drain_notice::watch() {
  char byte;
  while (::read(pipe_[0], &byte, 1) < 0 && errno == EINTR) {
  }
  logf(log_level::info, "notice of this worker's planned end (signal ", signal_number(), "): handing its work back");
  if (wake_) wake_();
  judge_running_item();
}

void drain_notice::judge_running_item() {
  auto given_at = given_at_ns_.load();
  auto began = task_began_ns_.load(std::memory_order_acquire);
  if (!began) return;  // between tasks: the main thread leaves at its next message
  auto done = in_task_.load(std::memory_order_relaxed);
  auto estimate = estimate_ns_.load(std::memory_order_relaxed);
  auto v = decide(notice_, estimate ? from_ns(estimate) : learned(), from_ns(monotonic_ns() - given_at));
  if (v.hand_back_now) {
    logf(log_level::info, "the item it runs would not finish within the notice: handed back");
    exit_worker(exit_drained);
  }
  // The same item still running then is handed back; once it finished, the main thread has seen
  // the notice between items and leaves by itself.
  std::this_thread::sleep_until(clock::time_point(from_ns(given_at)) + v.wait_until_ago);
  if (task_began_ns_.load(std::memory_order_acquire) == began && in_task_.load(std::memory_order_relaxed) == done) {
    logf(log_level::info, "the item it runs did not finish within the notice: handed back");
    exit_worker(exit_drained);
  }
}

}  // namespace fiber::detail

bool fiber::planned_end_notified() noexcept {
  auto* d = fiber::detail::armed.load();
  return d && d->given();
}
