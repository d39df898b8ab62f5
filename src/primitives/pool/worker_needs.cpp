#include "primitives/pool/worker_needs.hpp"

#include "primitives/child_process.hpp"

namespace fiber::detail {

meta worker_needs::full(const meta& needs) const {
  // Memory is a limit as well as a need: a worker without one (0) covers no function that
  // declares one, so such a function never runs unlimited.
  return needs_with_defaults(needs, cfg_);
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
