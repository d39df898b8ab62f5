// What a local child may use: the host's GPUs handed out as slots (a child with gpu = n gets n
// devices of its own and waits while they are all taken), its CPUs spread over the children
// that ask for a number of them (affinity; CPUs are shared, never waited for), and the checks
// that fail a request the host can never meet at once, naming what was asked and what exists.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"

namespace fiber::detail {

/// The GPUs of this host: the config key `gpus` ("auto": NVML through libnvidia-ml.so.1, else
/// `nvidia-smi -L`; "none"; or device ids "0,1"), and where that answer came from.
struct gpu_inventory {
  std::vector<std::string> ids;
  std::string source;  // for messages: "config gpus", "NVML", "nvidia-smi", or why none
};
gpu_inventory find_gpus(const std::string& config_value);
/// The GPUs this process may hand out: find_gpus in the master; in a fiber child that starts
/// children of its own (nested), the devices its parent gave it (CUDA_VISIBLE_DEVICES), whatever
/// the config says: a subtree's slots come out of its root's grant.
gpu_inventory gpus_to_hand_out(const std::string& config_value);

/// What one child was given.
struct local_grant {
  std::vector<std::string> gpus;
  std::vector<int> cpus;  // empty: not pinned
};

class local_resources {
 public:
  using find_gpus_fn = std::function<gpu_inventory()>;
  /// `find_gpus` runs once, when a child first asks for a GPU (or gpus() is read): a program
  /// whose children ask for none never loads the driver, whose start (NVML's init, or running
  /// `nvidia-smi`) would otherwise be every run's.
  local_resources(find_gpus_fn find_gpus, std::vector<int> cpus);
  local_resources(gpu_inventory gpus, std::vector<int> cpus);

  /// Throws fiber::error(unsatisfiable) when this host can never give what `spec` asks for.
  void check(const spawn_spec& spec) const;
  /// The grant for `spec` when its GPUs are free now; the CPUs are the least used ones.
  std::optional<local_grant> try_take(const spawn_spec& spec);
  void give_back(const local_grant& g);

  /// Queues `start` (in order) until it can take its grant; it returns false while it cannot.
  /// The number identifies it for cancel().
  std::uint64_t wait(std::function<bool()> start);
  void cancel(std::uint64_t ticket);
  /// Runs waiting starts in order while they succeed (after a give_back).
  void start_waiting();
  void clear_waiting() { waiting_.clear(); }

  const gpu_inventory& gpus() const;

 private:
  mutable std::once_flag found_;
  mutable find_gpus_fn find_gpus_;
  mutable gpu_inventory inventory_;
  mutable std::vector<bool> gpu_taken_;
  std::vector<int> cpus_;          // the CPUs this process may run on
  std::vector<int> cpu_users_;     // children pinned to each of them
  std::deque<std::pair<std::uint64_t, std::function<bool()>>> waiting_;
  std::uint64_t next_ticket_ = 1;
  bool starting_ = false;
};

/// Environment names the local backend gives a child for the limits it applies to itself.
inline constexpr const char* env_cpus = "FIBER_WORKER_CPUS";  // "3,5": pin to these

/// In a child, first thing: applies the limits its environment names. Returns what failed, or
/// an empty string.
std::string apply_local_limits();
/// Pins this process to `cpus` (none: left as it is) and limits its address space to
/// `memory_mb` MiB (0: no limit; only `fiber run --memory` asks for one, for a master it execs
/// and cannot watch). Returns what failed, or an empty string.
std::string apply_limits(const std::vector<int>& cpus, std::uint64_t memory_mb);

/// The CPUs this process may run on.
std::vector<int> allowed_cpus();

}  // namespace fiber::detail
