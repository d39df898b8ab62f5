// What the largest child a node can run has, and the capacity check the cluster backends share:
// a request no node can ever meet fails at start with errc::unsatisfiable, instead of pending.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.hpp"

namespace fiber::detail {

struct node_room {
  std::string name;
  double cpus = 0;              // cores (Kubernetes' allocatable may be fractional)
  std::int64_t memory_mb = 0;   // MiB
  std::int64_t gpus = -1;       // devices; -1: unknown here (the engine decides at start)
};

/// Where a check looks and how it words its error.
struct room_words {
  std::string where;     // "the 2 schedulable nodes of the cluster"
  std::string gpu;       // what one GPU is called there: "nvidia.com/gpu", "gres gpu"
  std::string fix;       // what to do besides asking for less
};

/// Throws fiber::error(errc::unsatisfiable) when no node in `nodes` has room for `spec`'s cpu,
/// memory_mb and gpu, naming what was asked and what the nodes have. Nodes whose GPUs are
/// unknown are taken to have enough.
void check_rooms(const std::vector<node_room>& nodes, const spawn_spec& spec, const room_words& words);

}  // namespace fiber::detail
