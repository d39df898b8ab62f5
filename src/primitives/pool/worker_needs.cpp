#include "primitives/pool/worker_needs.hpp"

#include <limits>

#include "primitives/child_process.hpp"

namespace fiber::detail {

meta worker_needs::full(const meta& needs) const {
  auto m = needs_with_defaults(needs, cfg_);
  if (m.memory_mb == 0) m.memory_mb = std::numeric_limits<int>::max();  // no limit covers any need
  return m;
}

bool worker_needs::met_by(const meta& has) {
  if (!has.covers(full(now_))) return false;
  base_ = now_;
  return true;
}

meta worker_needs::refuse() {
  auto refused = full(now_);
  now_ = base_;
  return refused;
}

}  // namespace fiber::detail
