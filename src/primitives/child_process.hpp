// The master's record of one child it starts: spawn, handshake, end, and what the child raised.
// fiber::process, each pool worker and each manager's server own one. Methods marked "loop" run
// on fiber's loop thread; the others answer from any thread.
#pragma once
#include <asio/steady_timer.hpp>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fiber/detail/unique_function.hpp"
#include "fiber/meta.hpp"
#include "fiber/process.hpp"
#include "fiber/registry.hpp"
#include "primitives/child_ending.hpp"
#include "primitives/child_start_gate.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {

struct spawn_spec;
/// The cpu, memory and GPUs a child with `needs` is started with (a need left at 0 takes the
/// config's default), as a spec with only those set: what backend::check_capacity weighs.
spawn_spec spec_for_needs(const meta& needs, const fiber::config& cfg);
/// `needs` with each need left at 0 replaced by the config's default: what two needs are
/// compared by (a function's `.cpu = 1` asks for no more than a worker given cpu_per_job = 1).
meta needs_with_defaults(const meta& needs, const fiber::config& cfg);

class child_process final : public child_endpoint, public std::enable_shared_from_this<child_process> {
 public:
  enum class phase { created, starting, running, ended };
  /// Called once on the loop: no error once the child passed its handshake, else why not.
  using started_handler = unique_function<void(std::error_code, std::string)>;

  /// How start() takes up a process that already runs (a durable run's worker that waited for a
  /// master taking the run up) instead of starting one: it gives the process what a new child
  /// would get in `spec` (where to link, its routing id and one-time word, its credentials) and
  /// returns its job; the handshake follows as for a new child.
  using adopter = unique_function<std::unique_ptr<job>(const spawn_spec& spec)>;

  /// A child that will run `call`, named "Process-N", with `needs` (by default those FIBER_META
  /// gave its target); with `take`, one that runs already, taken up.
  static std::shared_ptr<child_process> make(std::shared_ptr<runtime> rt, encoded_call call,
                                             std::optional<meta> needs = std::nullopt, adopter take = nullptr);
  /// Where a child runs, as it said in its handshake (empty before).
  struct place {
    std::string host;
    /// The processes that can map each other's shared memory share this (its host and process
    /// namespace).
    std::string memory_domain;
  };

  const std::shared_ptr<runtime>& rt() const noexcept { return rt_; }
  const std::string& name() const noexcept { return name_; }
  /// Before start() only.
  void set_name(std::string name);
  /// Before start() only: the child belongs to a pool, a manager or a ring, which ends with its
  /// context as a user expects (a user's own process still running then is worth a warning).
  void set_owned() { owned_ = true; }

  phase state() const noexcept { return state_.load(); }
  bool is_alive() const noexcept {
    auto s = state();
    return s == phase::starting || s == phase::running;
  }
  /// How it ended: its exit code once it exited (any thread), what its target raised once ended.
  const child_ending& ending() const noexcept { return ending_; }
  /// Its pid on its host; 0 before it is known.
  int pid() const noexcept;
  /// The engine's job while it runs (whether it is stopped, the engine's name for it); null
  /// before it runs and once it ended.
  const job* running_job() const noexcept { return child_ && state() == phase::running ? child_.get() : nullptr; }
  /// loop: while starting, why its engine has not started it yet (job::pending_reason).
  std::string pending_reason() const { return child_ && state() == phase::starting ? child_->pending_reason() : std::string(); }
  /// loop: where it runs, once its handshake came.
  const struct place& where() const noexcept { return place_; }
  /// Its id on the master's socket, for messages to it (set by start()).
  const std::string& peer() const noexcept { return peer_; }

  /// loop: spawns the child. `done` is taken (moved from) and called on the loop once the child
  /// passed its handshake or failed to. Throws, leaving `done` alone and the object startable
  /// again, when the child cannot even be spawned.
  void start(started_handler& done);
  /// loop: `f` runs once the child has ended (now, if it has).
  void when_ended(unique_function<void()> f) { ending_.when_ended(std::move(f)); }
  /// loop
  void signal(int sig) noexcept;
  /// loop: SIGTERM, then SIGKILL after terminate_grace_ms if it is still there.
  void terminate();
  /// loop: kills and reaps now. `why`, when given, is what the run's recording says ended it
  /// (its owner: "ended by its pool (terminate)"), in place of a bare "signal 9".
  void kill_now(std::string why = {}) noexcept;

 private:
  child_process(std::shared_ptr<runtime> rt, encoded_call call);

  // child_endpoint: what the master's socket hears from the child
  void on_hello(const std::string& text) override;
  void on_done(bool threw, const std::string& detail) override;
  void on_master_shutdown() noexcept override;

  void spawn();
  void on_exit(int code);
  void finish();

  std::shared_ptr<runtime> rt_;
  std::string name_;
  std::string tree_name_;  // in the run's recording: the parents' names before its own, nested
  bool owned_ = false;
  encoded_call call_;
  meta needs_;
  std::atomic<phase> state_{phase::created};
  std::atomic<int> pid_{0};
  std::shared_ptr<job> child_;  // set before state_ leaves `starting`
  std::string peer_;
  std::string nonce_;  // what its hello must carry (env_nonce)
  struct place place_;  // written on the loop before start completes
  child_start_gate start_;
  child_ending ending_;
  std::unique_ptr<asio::steady_timer> grace_timer_, kill_timer_;
  adopter adopter_;
};

}  // namespace fiber::detail
