// One interface for every place a child can run: local processes, Docker, Kubernetes, Slurm.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fiber/detail/unique_function.hpp"

namespace asio {
class io_context;
}

namespace fiber {
struct config;
}

namespace fiber::detail {

struct spawn_spec {
  std::string name;                                        // process name, for logs and labels
  std::string job_id;                                      // the master's job, for labels
  std::string executable;                                  // program to run
  std::vector<std::string> args;                           // argv[1..]
  std::vector<std::pair<std::string, std::string>> env;    // added to the inherited environment
  /// The child's credentials (job_keys::for_worker): never in env or argv, which engines show to
  /// readers of the spec; each backend puts them in a file only the child's user reads and names
  /// it in FIBER_WORKER_KEYS_FILE (backend/secret_store).
  std::string secret;
  int cpu = 1;
  bool cpu_declared = false;  // the function or pool asked for `cpu` (local children are pinned then)
  int memory_mb = 0;
  int gpu = 0;
  std::string host;  // run on this host (a host hub); empty: where the engine places it
  bool whole_host = false;  // with `host`: take every CPU the engine gives on it (a host hub that
                            // forks its host's children, hub_workers=fork), not `cpu`
};

/// A host a backend can start work on by name (backend::hub_hosts), and the CPUs it has.
struct hub_host {
  std::string name;
  int cpus = 0;
};

/// A started child.
class job {
 public:
  virtual ~job() = default;
  /// The child's pid on its host (0 while a container backend has not reported it yet).
  virtual int pid() const noexcept = 0;
  /// Calls `on_exit(code)` on the io_context once the child has ended: code >= 0 is its exit
  /// code, -N means killed by signal N.
  virtual void on_exit(unique_function<void(int)> on_exit) = 0;
  virtual void signal(int sig) noexcept = 0;
  /// Kills and reaps right now (used when the master goes away).
  virtual void kill_and_reap() noexcept = 0;
  /// Why the child ended, when the backend knows more than its exit code (the engine refused to
  /// start it; the last lines it wrote to stderr). Empty otherwise.
  virtual std::string exit_detail() const { return {}; }
  /// Where the engine put the child, in words, once it runs (the local backend: the cpus it is
  /// pinned to and its GPUs); empty where the engine does not say.
  virtual std::string placement() const { return {}; }
  /// True when the backend learned only by trying that no node can run this child (an engine
  /// without the device driver its GPU needs): its start fails with errc::unsatisfiable.
  virtual bool never_fits() const noexcept { return false; }
  /// Calls `f` on the io_context once pid() is known (at once where it always is).
  virtual void when_identified(unique_function<void()> f) { f(); }
  /// Calls `f` on the io_context once the child runs, queue waits over (at once where there is no
  /// queue): its handshake deadline counts from then.
  virtual void when_running(unique_function<void()> f) { f(); }
  /// The pid the child reported itself, for a backend that cannot ask its engine.
  virtual void reported_pid(int) {}
  /// The child said it is done and is about to exit: a backend that polls for the end looks soon.
  virtual void expect_exit() {}
  /// True while the child is stopped (SIGSTOP, traced), where the backend can tell; one that
  /// cannot says false, and its children are watched by heartbeats instead.
  virtual bool is_stopped() const noexcept { return false; }
  /// While the engine has not started it: why, in the engine's words (a Slurm job's pending
  /// reason, a pod's scheduling message or container's waiting reason). Empty when it is not
  /// waiting or the engine says nothing. On the io_context's thread.
  virtual std::string pending_reason() const { return {}; }
  /// Calls `f(reason)` on the io_context each time that reason changes (nothing where the engine
  /// never holds a child back).
  virtual void on_pending(unique_function<void(const std::string&)>) {}
};

class backend {
 public:
  virtual ~backend() = default;
  virtual std::string name() const = 0;
  /// Where the master should listen so these children can reach it.
  virtual std::string listen_endpoint(const std::string& job_id) const = 0;
  /// The address children dial, given the endpoint the master bound (e.g. tcp://0.0.0.0:5000
  /// becomes tcp://<master_address>:5000).
  virtual std::string advertised(const std::string& bound) const { return bound; }
  /// Throws fiber::error(errc::unsatisfiable), naming what was asked and what the nodes have,
  /// when no node of this backend can ever run a child with `spec`'s cpu, memory and GPUs. Cheap:
  /// it checks against what the backend learned when it started (the host, the engine, the nodes),
  /// so a pool can ask before it replaces workers for a function's larger needs.
  virtual void check_capacity(const spawn_spec&) const {}
  /// The hosts children may be placed on, where this backend can start work on a given one
  /// (spawn_spec::host), for remote_transport=hub; empty where it cannot (its children then link
  /// to the master directly).
  virtual std::vector<hub_host> hub_hosts() const { return {}; }
  /// Starts a child; throws fiber::error(errc::spawn_failed) with the reason.
  virtual std::unique_ptr<job> spawn(const spawn_spec& spec) = 0;
};


/// A backend whose children dial the master over TCP: it binds `bind_host_` and children dial
/// `advertise_host_` (the same, or an address that reaches a wider bind, e.g. master_address
/// with 0.0.0.0).
class tcp_backend : public backend {
 public:
  std::string listen_endpoint(const std::string&) const override { return "tcp://" + bind_host_ + ":*"; }
  std::string advertised(const std::string& bound) const override {
    if (bind_host_ == advertise_host_) return bound;
    return "tcp://" + advertise_host_ + bound.substr(bound.rfind(':'));
  }

 protected:
  std::string bind_host_, advertise_host_;
};

/// Why pidfd_open failed, with the fix: a kernel without it, or a process out of open files.
std::string pidfd_open_failure(int err);
/// This machine's host name.
std::string this_host();
/// Where this master runs, as its marks name it: the run a `fiber run` master belongs to
/// (FIBER_RUN_NAME, on every backend), else this machine's host name.
std::string master_host();
/// Who started a child, as container labels and job comments record it: `<master_host>:<pid>` of
/// this master. A later master on the same host removes what masters that are gone left behind;
/// `fiber ps` and `fiber gc` find a run's workers by it.
std::string master_mark();

/// The backend named by config.backend; an error naming what to do when it cannot be had.
std::unique_ptr<backend> make_backend(asio::io_context& io, const fiber::config& cfg, const std::string& job_id);
std::unique_ptr<backend> make_local_backend(asio::io_context& io, const fiber::config& cfg);
std::unique_ptr<backend> make_docker_backend(asio::io_context& io, const fiber::config& cfg,
                                             const std::string& job_id);
std::unique_ptr<backend> make_kubernetes_backend(asio::io_context& io, const fiber::config& cfg,
                                                 const std::string& job_id);
std::unique_ptr<backend> make_slurm_backend(asio::io_context& io, const fiber::config& cfg,
                                            const std::string& job_id);

}  // namespace fiber::detail
