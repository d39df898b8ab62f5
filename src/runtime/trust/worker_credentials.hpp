// How a child takes the credentials its master gave it: from the file FIBER_WORKER_KEYS_FILE
// names (backend/secret_store puts them there), read once, before any thread starts, and then
// removed from the environment so that nothing the child runs (a shell, a tool, a task's own
// subprocess) inherits even where to find them.
#pragma once
#include "runtime/trust/job_security.hpp"

namespace fiber::detail {

/// The credentials; fiber::error(protocol_error) saying what is missing or unreadable and that
/// only fiber starts workers.
job_keys take_worker_credentials();

}  // namespace fiber::detail
