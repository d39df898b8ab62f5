// Collectives as operations: a member's async collectives run, in call order, on a thread of the
// member's own, so the caller computes meanwhile. A blocking collective called meanwhile first
// waits for the queued ones: the order a member calls collectives in is the order on its links.
#pragma once
#include "fiber/ring.hpp"

namespace fiber::detail {

/// Before a blocking collective: returns once this member's queued async collectives are done (at
/// once on the collective thread itself, or when none is queued).
void wait_for_queued(const ring_member& me);

}  // namespace fiber::detail
