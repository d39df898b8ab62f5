// A child that a nested master asked the top master for (runtime/nested/spawn_relay), as the top's news
// tell of it: a run like an engine's (backend/engine_run.hpp keeps its waiters, as many as ask),
// whose signals go up to the top, which alone can reach the child. On fiber's loop thread.
#pragma once
#include <csignal>
#include <cstdint>
#include <functional>

#include "backend/engine_run.hpp"
#include "runtime/nested/spawn_wire.hpp"

namespace fiber::detail {

class relayed_run final : public engine_run {
 public:
  /// `send_up(kind, request, aux)`: an ask about this child to the master above.
  using send_fn = std::function<void(kind, std::uint64_t, std::uint32_t)>;
  explicit relayed_run(send_fn send_up)
      : engine_run({.queued = true, .identified_later = true}), send_up_(std::move(send_up)) {}
  std::uint64_t request = 0;  // its number with the master above

  void signal(int sig) noexcept override;
  // This process cannot reap it: the top master kills it, and hears its end.
  void kill_and_reap() noexcept override { signal(SIGKILL); }
  bool never_fits() const noexcept override { return never_fits_; }
  void expect_exit() override;
  void reported_pid(int p) override;

  // ---- the top master's news
  void identified(int p);
  void running() { mark_running(); }
  void exited(const spawn_wire::child_news& news);

 private:
  send_fn send_up_;
  bool never_fits_ = false;
};

}  // namespace fiber::detail
