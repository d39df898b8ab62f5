// What a pool's workers' memory limits may add up to, so that a pool the host cannot hold is
// refused when it is made (or when a function raises its workers' limits), with the sums, rather
// than found out by the kernel's OOM killer once its workers run. The budget is memory_budget_mb;
// left at 0 it is, for the local backend, this host's available memory less a reserve of a tenth
// of all of it (the master, the page cache and the other tenants of the host), and no budget
// elsewhere (an engine weighs each worker against its nodes itself). No process, no loop.
#pragma once
#include <cstdint>
#include <string>

#include "fiber/config.hpp"

namespace fiber::detail {

struct memory_budget {
  std::uint64_t mb = 0;  // 0: none
  std::string whence;    // "memory_budget_mb", or what the host has
};

/// The budget for pools under `cfg` (its backend's).
memory_budget memory_budget_for(const fiber::config& cfg);

/// Throws errc::unsatisfiable, naming the sums and the fixes, when `workers` workers each limited
/// to `limit_mb` MiB (0: no limit, which counts nothing) exceed `budget`.
void check_memory_budget(std::uint64_t workers, std::uint64_t limit_mb, const memory_budget& budget);
/// check_memory_budget against the budget of `cfg`, for a pool's `workers` workers limited to
/// `limit_mb` MiB (0: none, and nothing is read).
void check_pool_memory(int workers, int limit_mb, const fiber::config& cfg);

}  // namespace fiber::detail
