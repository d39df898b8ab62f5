/// @file
/// Typed settings. Precedence: code > FIBER_* environment > .fiberconfig file.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#include "fiber/detail/export.hpp"

namespace fiber {

/// How much a process logs: each level includes those after it; `off` logs nothing.
enum class log_level { trace, debug, info, warn, error, off };

/// Keys and values given in code: `config::load({{"backend", "docker"}})`.
using config_overrides = std::initializer_list<std::pair<std::string_view, std::string_view>>;

/// Every setting of fiber, typed; each member is a key of the same name (`FIBER_<KEY>` in the
/// environment, `key = value` in `.fiberconfig`). docs/config.md says what each does.
struct FIBER_API config {
  std::string backend = "local";            ///< local | docker | kubernetes | slurm
  std::string image;                        ///< container image for docker/kubernetes
  fiber::log_level log_level = log_level::warn;  ///< what each process logs
  std::string log_file;                     ///< prefix: each process logs to `<prefix>.<name>.log`; empty: stderr
  int cpu_per_job = 1;                      ///< default cpus of a child
  int mem_per_job = 0;                      ///< default MiB of a child, 0: no limit
  std::string local_memory_limit = "auto";  ///< how local children's memory_mb binds: auto (a memory
                                            ///< cgroup each, where this host lets fiber make one,
                                            ///< else the watch) or watch (read every memory_poll_ms)
  int memory_poll_ms = 100;                 ///< local children with a memory limit: their resident
                                            ///< memory is read this often (where no cgroup limits it)
  bool retry_memory_exceeded = false;       ///< an item whose worker went past its memory limit runs
                                            ///< again (as after any death); false: it fails with
                                            ///< memory_exceeded at once
  int outside_deaths_ms = 60000;            ///< pool workers killed from outside (SIGKILL, SIGTERM) in
                                            ///< a row, at least 16, with no item finished for this
                                            ///< long, fail the pool's work (their items run again
                                            ///< uncharged until then)
  int drain_notice_ms = 30000;               ///< how long before a worker's planned end it is told
                                            ///< (Slurm --signal, a pod's and a container's stop
                                            ///< grace); a pool worker told so hands its work back
  std::uint64_t memory_budget_mb = 0;       ///< what a pool's workers' memory limits may add up to;
                                            ///< 0: the local backend's is this host's available
                                            ///< memory less a reserve, other backends' unbounded
  std::string volumes;                      ///< container backends: "src[:/path][:ro],..." where src is a
                                            ///< host path, a named volume (docker) or a claim
                                            ///< (kubernetes); the path defaults to /persistent
  std::string docker_network = "host";      ///< host, bridge, or the name of a Docker network
  std::string master_address;               ///< address children use to reach the master; empty: the
                                            ///< backend picks one they can reach
  int heartbeat_interval_ms = 1000;         ///< ZeroMQ heartbeat period
  int heartbeat_timeout_ms = 10000;         ///< a silent peer is dropped after this
  std::string executable;                   ///< program a child runs; empty: this program
  std::uint64_t max_message_bytes = std::uint64_t{1} << 30;  ///< larger payloads are refused
  std::uint64_t shared_cache_bytes = 0;     ///< the fiber::shared objects a pool has sent and that are
                                            ///< still in use, together; 0: a quarter of this host's memory
  int start_timeout_ms = 60000;             ///< a child must complete the handshake in this time
  int max_depth = 4;                        ///< children may start children down to this depth (the master is 0)
  int terminate_grace_ms = 2000;            ///< SIGTERM, then SIGKILL after this
  std::uint64_t malloc_keep_mb = 256;       ///< freed memory a process keeps for reuse (glibc malloc);
                                            ///< 0: malloc's own defaults
  int idle_trim_ms = 1000;                  ///< a master gives freed memory back once no pool has had a
                                            ///< call under way this long; 0: never
  std::string gpus = "auto";                ///< local backend: the devices children get, as slots:
                                            ///< auto (NVML, else nvidia-smi -L), none, or ids "0,1"
  std::string start_method = "forkserver";  ///< local children: forkserver (forked by a clean helper
                                            ///< process started once) or spawn (exec each child)
  std::string encryption = "auto";          ///< auto: CURVE across networks, authentication only on
                                            ///< local unix sockets; always: CURVE everywhere
  std::string local_transport = "direct";   ///< children on this host: direct (a unix stream socket
                                            ///< each, no ZeroMQ) or zeromq (as across a network);
                                            ///< encryption=always implies zeromq
  std::string remote_transport = "direct";  ///< children on other hosts: direct (TCP with TLS 1.3,
                                            ///< no I/O thread), hub (the same to one hub process per
                                            ///< host, its children on unix sockets; Slurm, elsewhere
                                            ///< as direct) or zeromq (TCP with CURVE)
  std::string hub_workers = "engine";       ///< remote_transport=hub: engine (each child is the
                                            ///< engine's own work) or fork (each host's hub holds
                                            ///< the host and forks the children placed there)
  int wait_spin_us = 50;                    ///< a blocked caller polls fiber's loop this long before it
                                            ///< sleeps (a quick answer then costs no wake-up); 0: sleep
  int shared_links = 64;                    ///< local_transport=direct: up to this many children on
                                            ///< the master's host pass their messages through shared
                                            ///< memory (512 KiB each), the rest through their unix
                                            ///< socket; 0: all through sockets
  bool record = true;                       ///< the flight recorder: a file per run of what it did
                                            ///< (fiber history, fiber trace); false: none
  std::string record_dir;                   ///< where: empty: $XDG_STATE_HOME/fiber/runs, else
                                            ///< ~/.local/state/fiber/runs
  std::uint64_t record_max_bytes = std::uint64_t{128} << 20;  ///< a run's file stops growing here
  int record_keep = 50;                     ///< recordings kept per program in the folder (its oldest go)
  int record_memory_ms = 1000;              ///< each process's memory is recorded this often (and at
                                            ///< its end); 0: at its end only
  int record_manager_calls = 8;             ///< 1 in this many calls a manager serves is recorded
                                            ///< (each that raised too); 0: none
  bool durable = false;                     ///< the master journals its maps' results: started again
                                            ///< with the same run_id, it takes up where it stopped
  std::string run_id;                       ///< a durable run's name; empty: one is made and printed
  std::string journal_dir;                  ///< where durable runs' journals are: empty: beside the
                                            ///< recordings ($XDG_STATE_HOME/fiber/journals, else
                                            ///< ~/.local/state/fiber/journals)
  int journal_sync_ms = 100;                ///< a journal's appends are made durable this often
  std::uint64_t journal_max_bytes = std::uint64_t{4} << 30;  ///< a run's journal grows no further
  int reattach_grace_ms = 60000;            ///< a durable run's worker whose master died waits this
                                            ///< long for the master that takes the run up, then exits
  bool dashboard = false;                   ///< the master serves a live page of the run; the URL
                                            ///< it prints to stderr carries a random token
  std::string dashboard_address = "127.0.0.1";  ///< where the page listens: this host only
  int dashboard_port = 0;                   ///< 0: a free port the system picks
  int dashboard_interval_ms = 500;          ///< how often the page is updated
  // backend=kubernetes
  std::string kubernetes_namespace;         ///< empty: the master pod's namespace, else the kubeconfig
                                            ///< context's, else "default"
  std::string kubernetes_context;           ///< kubeconfig context; empty: its current-context
  std::string kubernetes_gpu_resource = "nvidia.com/gpu";  ///< the extended resource `gpu` asks for
  std::string kubernetes_cpu_request;       ///< what a pod requests of each CPU it is limited to ("100m"); empty: all of it
  std::string kubernetes_pod_patch;         ///< a JSON merge patch (RFC 7386) applied to every worker
                                            ///< pod: node selectors, tolerations, pull secrets, ...
  std::string kubernetes_service_account;   ///< serviceAccountName of worker pods, whose token is then
                                            ///< mounted; empty: the namespace's default account with
                                            ///< no token mounted (a worker reaches no API), never the
                                            ///< master pod's, which may manage pods
  int kubernetes_pending_timeout_ms = 300000;  ///< a pod not running after this fails its start
  int kubernetes_stop_timeout_ms = 30000;      ///< after terminate's grace, how long the kubelet gets to report the pod stopped
  bool kubernetes_autoscaling = false;      ///< unschedulable pods wait (for nodes an autoscaler adds)
                                            ///< up to the pending timeout; false: they fail at once
  int kubernetes_qps = 20;                  ///< API requests per second (creates, deletes), and
  int kubernetes_burst = 40;                ///< how many may go at once above that rate

  // backend=slurm
  std::string slurm_mode = "auto";          ///< auto: steps inside an allocation (SLURM_JOB_ID set),
                                            ///< batch jobs outside; steps | batch force one
  std::string slurm_partition;              ///< --partition of every job (empty: the cluster's default)
  std::string slurm_account;                ///< --account
  std::string slurm_qos;                    ///< --qos
  std::string slurm_time_limit;             ///< --time, Slurm's format: minutes, [D-]HH:MM:SS, ...
  std::string slurm_constraint;             ///< --constraint (node features)
  std::string slurm_sbatch_args;            ///< more sbatch arguments, space-separated
  std::string slurm_srun_args;              ///< more srun arguments, space-separated
  int slurm_pending_timeout_ms = 0;         ///< a batch job pending longer fails its start; 0: no limit
  int slurm_jobs_per_pass = 0;              ///< batch jobs submitted to share one scheduling pass; more
                                            ///< go as later arrays; 0: the controller's default_queue_depth
  std::string slurm_dir;                    ///< where batch jobs write their output (a file system the
                                            ///< nodes share); empty: $HOME/.fiber/slurm

  /// Sets a key from text; throws fiber::error(errc::config_error) naming the key on an unknown
  /// key or a bad value.
  void set(std::string_view key, std::string_view value);
  /// The value of a key as text.
  std::string get(std::string_view key) const;
  /// Every key with its value as text (what travels to children).
  std::vector<std::pair<std::string, std::string>> items() const;
  /// Every key's name, in the order of the members.
  static const std::vector<std::string_view>& keys();

  /// Defaults, then `.fiberconfig` in the working directory (or the file named by
  /// FIBER_CONFIG_FILE), then FIBER_<KEY> environment variables, then `overrides`.
  static config load(config_overrides overrides = {});
  /// As load() above, with the overrides as owned strings.
  static config load(const std::vector<std::pair<std::string, std::string>>& overrides);

  /// Equal when every key has the same value.
  friend bool operator==(const config&, const config&) = default;
};

}  // namespace fiber
