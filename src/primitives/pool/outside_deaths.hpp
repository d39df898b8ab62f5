// Which ends of a pool's worker its item can have caused, and a bound on those it cannot. A crash
// (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL), an exit, a memory stop, a timeout or an end the pool
// itself chose (it stopped answering) are the item's: charged an attempt. A SIGKILL or SIGTERM
// that no memory limit and no pool sent came from outside (an administrator's kill, an engine
// reclaiming its node, a pod deleted, a Slurm job cancelled): the items it held run again
// uncharged, however often. Uncharged, they would also run again for ever where every worker is
// killed as it starts, or where an item brings the kernel's OOM killer down on its worker: so
// deaths from outside that come in a row, with no item finished between, fail the pool's work
// once they are at least a count and have gone on for a while (a node that kills every worker
// for a few seconds, then lets them be, costs only time), with an error that says so. No
// process, no loop: the caller says what time it is.
#pragma once
#include <chrono>
#include <cstddef>
#include <exception>
#include <optional>
#include <string>

namespace fiber::detail {

/// Whether a worker that ended with `exit_code` (-N: by signal N), with no memory stop and no
/// reason of its pool's (`stopped_by_pool`), was ended from outside.
bool ended_from_outside(std::optional<int> exit_code, bool memory_stopped, bool stopped_by_pool);

class outside_deaths {
 public:
  using clock = std::chrono::steady_clock;
  /// `budget`: the deaths from outside in a row, holding items, that fail the pool's work once
  /// the row has gone on for `window`.
  outside_deaths(std::size_t budget, std::chrono::milliseconds window) : budget_(budget), window_(window) {}

  /// A worker holding items ended from outside at `now`: true once `budget` such ends came in a
  /// row over at least `window`.
  bool on_death(clock::time_point now) {
    if (in_row_++ == 0) row_began_ = now;
    return in_row_ >= budget_ && now - row_began_ >= window_;
  }
  /// An item finished: deaths count from 0 again.
  void on_progress() noexcept { in_row_ = 0; }
  std::size_t in_row() const noexcept { return in_row_; }
  /// The error the pool's work fails with once on_death() said so: the last worker and how it ended.
  std::exception_ptr error_after(const std::string& worker, const std::string& how) const;

 private:
  std::size_t budget_;
  std::chrono::milliseconds window_;
  std::size_t in_row_ = 0;
  clock::time_point row_began_{};
};

}  // namespace fiber::detail
