// A worker's life (handshake, target, report) and the guard against a program without fiber::init.
#pragma once

#include "core/worker_env.hpp"

namespace fiber::detail {
/// Set by fiber::init in a master.
bool& init_was_called();
/// Guards against a program that does not call fiber::init: in a process fiber started as a
/// child, it ends the process (running main again would start children of its own); in a master,
/// it throws before any child is started.
void require_init();

/// The worker's whole life: handshake, target, report. Returns the exit code.
int run_worker();
/// Flushes stdio and leaves the process without running the program's static destructors.
[[noreturn]] void exit_worker(int code);
}  // namespace fiber::detail
