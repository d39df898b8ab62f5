// How a child ended, as its master records it: its exit code (-N: killed by signal N), what its
// target raised (from its `done`), who ended it when fiber did, and who waits for its end. The exit
// code is read from any thread; the rest is written and read on fiber's loop.
#pragma once
#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "backend/engine_run.hpp"
#include "fiber/detail/unique_function.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

class child_ending {
 public:
  /// Once the child has exited: its exit code.
  std::optional<int> exit_code() const noexcept {
    if (!exited_.load()) return std::nullopt;
    return code_.load();
  }
  /// Once ended: what its target raised, if it raised.
  std::optional<remote_error> raised() const { return ended_.load() ? raised_ : std::nullopt; }
  /// What the run's recording says ended it, when fiber did ("ended by its pool (terminate)").
  const std::string& ended_by() const noexcept { return ended_by_; }
  /// Whether its `done` came (what it sent before exiting may still be in flight when it exits).
  bool done_heard() const noexcept { return done_heard_; }
  bool ended() const noexcept { return ended_.load(); }

  /// Its `done`: `threw` with `detail` (a remote_failure's text) when its target raised. `name`
  /// is the child's, for the error and the log.
  void heard_done(bool threw, const std::string& detail, const std::string& name);
  void exited(int code) noexcept {
    code_ = code;
    exited_ = true;
  }
  /// fiber killed it (SIGKILL), for `why`.
  void killed(std::string why) noexcept;
  /// Its engine (or fiber's watch) stopped it for going past its memory limit.
  void went_past_memory(const memory_stop& m) { memory_ = m; }
  /// loop: set when it was stopped for going past its memory limit.
  const std::optional<memory_stop>& memory_stopped() const noexcept { return memory_; }

  /// loop: `f` runs once the child has ended (now, if it has).
  void when_ended(unique_function<void()> f);
  /// loop: it has ended (once): the waiters, for the caller to run once the end is recorded.
  std::vector<unique_function<void()>> end();

 private:
  std::atomic<bool> exited_{false}, ended_{false};
  std::atomic<int> code_{0};
  bool done_heard_ = false;
  std::optional<remote_error> raised_;  // written on the loop before ended_
  std::string ended_by_;
  std::optional<memory_stop> memory_;
  std::vector<unique_function<void()>> waiters_;
};

}  // namespace fiber::detail
