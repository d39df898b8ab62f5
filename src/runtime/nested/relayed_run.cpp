#include "runtime/nested/relayed_run.hpp"

namespace fiber::detail {

void relayed_run::signal(int sig) noexcept {
  if (finished()) return;
  try {
    send_up_(spawn_wire::signal, request, static_cast<std::uint32_t>(sig));
  } catch (...) {
    // The master above is gone: it ends this child itself.
  }
}

void relayed_run::expect_exit() {
  if (!finished()) send_up_(spawn_wire::expect_exit, request, 0);
}

void relayed_run::reported_pid(int p) {
  if (finished() || p <= 0) return;
  // A backend that cannot ask its engine (Slurm) knows the pid only from the child: the top's
  // news may have said 0.
  if (!pid) pid = p;
  send_up_(spawn_wire::reported_pid, request, static_cast<std::uint32_t>(p));
}

void relayed_run::identified(int p) {
  if (p) pid = p;
  mark_identified();
}

void relayed_run::exited(const spawn_wire::child_news& news) {
  if (news.pid) pid = news.pid;
  never_fits_ = news.never_fits;
  if (news.memory) stopped_for_memory(*news.memory);
  report_end(news.code, news.detail);
}

}  // namespace fiber::detail
