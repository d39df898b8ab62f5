// One interface for every place a child can run: local processes, Docker, Kubernetes, Slurm.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/engine_run.hpp"
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
  /// Takes up the child the engine calls `handle` (job::handle), which an earlier master of the
  /// run started (a durable run's worker that waited for a master taking the run up), as a job of
  /// this master's. Throws fiber::error(errc::spawn_failed) when it is gone, and
  /// fiber::error(errc::unsatisfiable) where this backend cannot (the default).
  virtual std::unique_ptr<job> adopt(const std::string& handle);
};


/// Whether a run's workers outlive their master, waiting reattach_grace_ms for one that takes the
/// run up (a durable run with a grace): the engines mark them, and their sweeps of a dead master's
/// leftovers spare them while they run.
bool workers_wait_for_next_master(const fiber::config& cfg);

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
