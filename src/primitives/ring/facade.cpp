// fiber::ring's members (fiber/ring.hpp): each an op or a read over the master's ring service
// (ring/master.hpp).
#include "fiber/ring.hpp"

#include "core/log.hpp"
#include "primitives/child_process.hpp"
#include "primitives/ring/master.hpp"
#include "runtime/runtime.hpp"

namespace fiber {

ring::ring(context& ctx, int size, void (*f)(ring_member&), ring_options options)
    : core_(std::make_shared<detail::ring_core>(ctx.runtime(), size, f, options)) {}
ring::ring(ring&&) noexcept = default;
ring& ring::operator=(ring&&) noexcept = default;

ring::~ring() {
  if (!core_) return;
  auto core = core_;
  auto rt = core->rt();
  if (rt->is_shut_down()) return;
  if (core->any_alive()) detail::logf(log_level::warn, "a ring was destroyed while members still ran: killed");
  try {
    // Not waiting: with the caller's own io_context the loop may not run now.
    rt->run_soon([core] {
      core->kill_all();
      core->detach();
    });
  } catch (const std::exception& e) {
    detail::logf(log_level::error, "could not stop a ring's members: ", e.what());
  }
}

int ring::size() const noexcept { return core_->size(); }

op<void> ring::start() {
  return detail::deferred_op<void>(core_->rt(), [core = core_] { return core->start(); });
}

op<void> ring::join() {
  return detail::deferred_op<void>(core_->rt(), [core = core_] { return core->join(); });
}

std::vector<std::optional<int>> ring::exitcodes() const {
  std::vector<std::optional<int>> out;
  for (auto& m : core_->members())
    out.push_back(m->state() == detail::child_process::phase::ended ? m->ending().exit_code() : std::nullopt);
  return out;
}

int ring::restarts() const noexcept { return core_->restarts(); }

std::vector<int> ring::pids() const {
  std::vector<int> out;
  for (auto& m : core_->members()) out.push_back(m->pid());
  return out;
}

}  // namespace fiber
