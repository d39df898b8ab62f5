#include "primitives/pool/outside_deaths.hpp"

#include <csignal>

#include "fiber/error.hpp"

namespace fiber::detail {

bool ended_from_outside(std::optional<int> exit_code, bool memory_stopped, bool stopped_by_pool) {
  if (!exit_code || memory_stopped || stopped_by_pool) return false;
  return *exit_code == -SIGKILL || *exit_code == -SIGTERM;
}

std::exception_ptr outside_deaths::error_after(const std::string& worker, const std::string& how) const {
  return std::make_exception_ptr(error(
      errc::worker_lost,
      std::to_string(in_row_) + " of this pool's workers in a row were ended from outside while holding items, with no " +
          "item finished for at least " + std::to_string(window_.count()) + " ms (outside_deaths_ms; the last, " + worker +
          ", " + how +
          "): something ends them as they start (an administrator, the engine reclaiming its nodes, the kernel's OOM "
          "killer on an item that uses the host's memory up); the pool stops running its items again rather than "
          "for ever. Find what kills them, or give the items a memory limit (memory_mb) so that one that uses too "
          "much fails alone"));
}

}  // namespace fiber::detail
