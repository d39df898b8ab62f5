// fiber::manager and fiber::async_manager: the non-template members, each a call into the
// master's side (manager/master.hpp).
#include "core/log.hpp"
#include "fiber/manager.hpp"
#include "primitives/manager/master.hpp"
#include "runtime/runtime.hpp"

namespace fiber {

manager::manager() : manager(context::default_context(), false) {}
manager::manager(context& ctx) : manager(ctx, false) {}
manager::manager(context& ctx, bool async)
    : rt_(ctx.runtime()), core_(std::make_shared<detail::manager_core>(rt_, async)) {
  // Not waiting: with the caller's own io_context the loop may not run yet. Calls made before
  // the server is up wait for it; a server that cannot start fails them (and ready()).
  rt_->run_soon([core = core_] { core->start(); });
}
manager::manager(manager&&) noexcept = default;
manager& manager::operator=(manager&&) noexcept = default;

manager::~manager() {
  if (!core_) return;
  try {
    if (rt_->is_shut_down()) return;
    if (rt_->loop().in_loop_thread() || !rt_->loop().owns_loop()) {
      // Nobody may be running the caller's io_context now: ask, don't wait (context::stop()
      // kills a server that is still there).
      rt_->run_soon([core = core_] {
        // The core lives until its server has ended (or was killed after terminate_grace_ms):
        // its timer and its process are what end the server.
        core->shutdown([keep = core] {});
        core->detach();
      });
      return;
    }
    (void)shutdown().get();
    rt_->loop().run_sync([core = core_] { core->detach(); });
  } catch (const std::exception& e) {
    detail::logf(log_level::error, "stopping a manager: ", e.what());
  }
}


op<void> manager::ready() {
  return detail::callback_op(rt_, [core = core_](const detail::done_callback& done) { core->when_ready(done); });
}

op<void> manager::shutdown() {
  auto c = std::make_shared<detail::completion<std::monostate>>();
  // At once, as multiprocessing's shutdown(): not only when the op is awaited.
  rt_->loop().run_sync([&, core = core_] { core->shutdown([c] { c->set_value({}); }); });
  return detail::completion_op(rt_, c);
}

int manager::pid() const { return core_ ? core_->pid() : 0; }

async_manager::async_manager() : manager(context::default_context(), true) {}
async_manager::async_manager(context& ctx) : manager(ctx, true) {}

}  // namespace fiber
