// fiber::process: each operation a deferred_op over the child_process it owns.
#include "fiber/process.hpp"

#include <asio/steady_timer.hpp>
#include <sched.h>
#include <unistd.h>

#include <csignal>

#include "core/log.hpp"
#include "fiber/detail/completion.hpp"
#include "primitives/child_process.hpp"

namespace fiber {
namespace detail {
namespace {

/// loop: completes with true once `p` has ended, false when `timeout` passed first.
std::shared_ptr<completion<bool>> ended_within(const std::shared_ptr<child_process>& p, const char* what,
                                               std::optional<std::chrono::milliseconds> timeout) {
  if (p->state() == child_process::phase::created)
    throw error(errc::not_started, std::string(what) + " on process " + p->name() + " before start()");
  auto c = std::make_shared<completion<bool>>();
  std::shared_ptr<asio::steady_timer> timer;
  if (timeout) {
    timer = std::make_shared<asio::steady_timer>(p->rt()->io(), *timeout);
    timer->async_wait([c](std::error_code ec) {
      if (!ec) c->set_value(false);
    });
  }
  p->when_ended([c, timer] {
    if (timer) timer->cancel();
    c->set_value(true);
  });
  return c;
}

}  // namespace
}  // namespace detail

process::process(context& ctx, detail::encoded_call call)
    : state_(detail::child_process::make(ctx.runtime(), std::move(call))) {}

process::process(process&&) noexcept = default;
process& process::operator=(process&&) noexcept = default;

process::~process() {
  if (!state_ || !state_->is_alive()) return;
  auto p = state_;
  try {
    if (daemon_) {
      detail::logf(log_level::warn, "daemon process ", p->name(), " was still running when its process object was destroyed: killed");
      p->rt()->loop().run_sync([p] { p->kill_now(); });
      return;
    }
    // As multiprocessing: a non-daemon child runs on, and its context waits for it at its end.
    p->rt()->loop().run_sync([p] {
      auto& rt = *p->rt();
      if (!p->is_alive() || rt.is_shut_down()) return;
      auto id = rt.holds().hold(p, p->name());
      p->when_ended([weak = std::weak_ptr<detail::runtime>(p->rt()), id] {
        if (auto r = weak.lock()) r->holds().let_go(id);
      });
    });
  } catch (const std::exception& e) {
    detail::logf(log_level::error, "could not hand process ", p->name(), " to its context: ", e.what());
  }
}

void process::set_daemon(bool daemon) {
  if (state_->state() != detail::child_process::phase::created)
    throw error(errc::already_started, "process " + state_->name() + ": set_daemon() must come before start()");
  daemon_ = daemon;
}

op<void> process::start() {
  return detail::deferred_op<void>(state_->rt(), [p = state_] {
    auto c = std::make_shared<detail::completion<std::monostate>>();
    detail::child_process::started_handler done = [c](std::error_code ec, const std::string& what) {
      if (ec)
        c->set_error(std::make_exception_ptr(error(ec, what)));
      else
        c->set_value({});
    };
    p->start(done);  // what it throws (cannot spawn) is the op's error
    return c;
  });
}

op<void> process::join() {
  return detail::deferred_op<void>(state_->rt(), [p = state_] { return detail::ended_within(p, "join", std::nullopt); });
}

op<bool> process::join(std::chrono::milliseconds timeout) {
  return detail::deferred_op<bool>(state_->rt(), [p = state_, timeout] { return detail::ended_within(p, "join", timeout); });
}

op<void> process::terminate() {
  return detail::deferred_op<void>(state_->rt(), [p = state_] {
    auto c = detail::ended_within(p, "terminate", std::nullopt);
    p->terminate();
    return c;
  });
}

bool process::is_alive() const noexcept { return state_->is_alive(); }
std::optional<int> process::exitcode() const noexcept {
  if (state_->state() != detail::child_process::phase::ended) return std::nullopt;
  return state_->ending().exit_code();
}
std::optional<remote_error> process::exception() const { return state_->ending().raised(); }
int process::pid() const noexcept { return state_->pid(); }
const std::string& process::name() const noexcept { return state_->name(); }
void process::set_name(std::string name) { state_->set_name(std::move(name)); }

process_info current_process() { return {detail::process_name(), static_cast<int>(::getpid()), is_worker()}; }

std::vector<int> active_children() {
  auto rt = context::default_context().runtime();
  std::vector<int> pids;
  rt->loop().run_sync([&] { pids = rt->master().live_pids(); });
  return pids;
}

int cpu_count() noexcept {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

}  // namespace fiber
