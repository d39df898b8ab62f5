#include "primitives/pool/memory_budget.hpp"

#include <algorithm>

#include "core/process_memory.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

memory_budget memory_budget_for(const fiber::config& cfg) {
  if (cfg.memory_budget_mb > 0) return {cfg.memory_budget_mb, "memory_budget_mb"};
  if (cfg.backend != "local") return {};
  auto host = this_host_memory();
  if (host.total == 0 || host.available == 0) return {};  // the kernel does not say: no budget to hold to
  auto reserve = host.total / 10;
  auto mb = host.available > reserve ? (host.available - reserve) >> 20 : 1;
  return {mb, "this host's available memory (" + std::to_string(host.available >> 20) + " MiB) less a reserve of " +
                  std::to_string(reserve >> 20) + " MiB"};
}

void check_memory_budget(std::uint64_t workers, std::uint64_t limit_mb, const memory_budget& budget) {
  if (budget.mb == 0 || limit_mb == 0) return;
  auto sum = workers * limit_mb;
  if (sum <= budget.mb) return;
  throw error(errc::unsatisfiable,
              "pool: " + std::to_string(workers) + " workers with a memory limit of " + std::to_string(limit_mb) +
                  " MiB each add up to " + std::to_string(sum) + " MiB, more than the memory budget of " +
                  std::to_string(budget.mb) + " MiB (" + budget.whence +
                  "); use fewer processes, a lower memory_mb, or set memory_budget_mb");
}

void check_pool_memory(int workers, int limit_mb, const fiber::config& cfg) {
  if (limit_mb <= 0) return;  // no limit: nothing to add up (and no /proc/meminfo to read)
  check_memory_budget(static_cast<std::uint64_t>(std::max(workers, 0)), static_cast<std::uint64_t>(limit_mb),
                      memory_budget_for(cfg));
}

}  // namespace fiber::detail
