// One long-lived thread that starts every local child. Linux delivers PR_SET_PDEATHSIG when the
// parent *thread* ends, not the process: a child started by whichever thread happened to drive
// the loop (a caller's short-lived thread, say) was killed when that thread ended. Children
// started here die with the process and with nothing less.
#pragma once
#include "fiber/detail/unique_function.hpp"

namespace fiber::detail {

/// Runs `f` on the spawner thread and waits for it; what `f` throws is rethrown here. Called on
/// the spawner thread itself, it runs `f` at once.
void run_on_spawner_thread(unique_function<void()> f);

}  // namespace fiber::detail
