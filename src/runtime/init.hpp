// A worker's life: the handshake, its target, its report (fiber::init runs it in a process
// fiber started as a child).
#pragma once

#include "core/worker_env.hpp"

namespace fiber::detail {
/// The worker's whole life: handshake, target, report. Returns the exit code.
int run_worker();
}  // namespace fiber::detail
