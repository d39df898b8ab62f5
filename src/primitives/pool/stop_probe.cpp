#include "primitives/pool/stop_probe.hpp"

#include <csignal>

#include "core/log.hpp"
#include "primitives/child_process.hpp"
#include "runtime/protocol.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {

stop_probe::stop_probe(runtime& rt, std::uint64_t pool_id, std::map<std::string, pool_worker>& workers)
    : rt_(rt), pool_id_(pool_id), workers_(workers) {}

void stop_probe::start(std::weak_ptr<void> owner) {
  owner_ = std::move(owner);
  timer_ = std::make_unique<asio::steady_timer>(rt_.io());
  schedule();
}

void stop_probe::cancel() noexcept {
  if (timer_) timer_->cancel();
}

void stop_probe::schedule() {
  timer_->expires_after(std::chrono::milliseconds(rt_.cfg().heartbeat_interval_ms));
  timer_->async_wait([owner = owner_, this](std::error_code ec) {
    auto alive = owner.lock();
    // After the context stopped nothing is left to watch, and a caller's io_context must be
    // able to run out of work.
    if (ec || !alive || rt_.is_shut_down()) return;
    probe();
    schedule();
  });
}

void stop_probe::probe() {
  bool by_state = !rt_.master().links().heartbeats();
  auto now = std::chrono::steady_clock::now();
  auto patience = std::chrono::milliseconds(rt_.cfg().heartbeat_timeout_ms);
  for (auto& [rid, w] : workers_) {
    if (!w.connected || w.tasks.empty() || w.draining) {  // a draining worker's end is expected
      w.stopped_since.reset();
      continue;
    }
    if (by_state) {
      // No heartbeats on this host's unix sockets: the kernel says whether it is stopped.
      if (auto* job = w.proc->running_job(); !job || !job->is_stopped()) {
        w.stopped_since.reset();
      } else if (!w.stopped_since) {
        w.stopped_since = now;
      } else if (now - *w.stopped_since >= patience) {
        logf(log_level::warn, w.proc->name(), " has been stopped for heartbeat_timeout_ms holding tasks; killing it");
        w.why_ended = "it stopped answering (stopped for heartbeat_timeout_ms)";
        w.proc->signal(SIGKILL);
      }
      continue;
    }
    if (!w.why_ended.empty()) continue;  // being ended already
    if (auto err = rt_.master().try_send_to_child(rid, make_message(kind::probe, {.channel = pool_id_}))) {
      logf(log_level::warn, w.proc->name(), " lost its connection (", err.message(),
           ") holding tasks: ending it as a lost worker");
      w.why_ended = "it stopped answering";
      w.proc->terminate();  // as worker_set::unreachable: the engine's word on its end counts
    }
  }
}

}  // namespace fiber::detail
