// A master taking a durable run up finds the workers its journal names for a pool, before the
// pool starts new ones: it dials each one's reattach point (runtime/links/reattach_dial), and each
// that answers and proves its secret is taken up as one of the pool's workers (its process
// adopted by the backend, its handshake as a new child's), with what it says it holds noted as
// claims on the chunks the journal says its tasks were (reattach_claims). A worker that is gone,
// or does not answer, is left; the pool starts a new one in its place. On fiber's loop thread.
#pragma once
#include <cstdint>
#include <vector>

#include "primitives/pool/durable_maps.hpp"
#include "primitives/pool/reattach_claims.hpp"

namespace fiber::detail {
class runtime;
class worker_set;

/// Takes up the workers `journal` holds for pool `pool_id` into `workers`, notes their claims, and
/// journals them again as this master's; returns how many were taken up.
std::size_t take_up_workers(runtime& rt, durable_maps& journal, std::uint64_t pool_id, worker_set& workers,
                            reattach_claims& claims);

}  // namespace fiber::detail
