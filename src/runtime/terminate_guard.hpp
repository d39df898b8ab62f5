// A master that ends by std::terminate (an uncaught exception, most often a config or resource
// error nobody caught) still ends its children first, on every backend: containers, pods and
// Slurm jobs would otherwise run on until their heartbeat timeout and wait for `fiber gc`.
#pragma once
#include <memory>

namespace fiber::detail {
class runtime;

/// `rt` (a master's) is ended by the terminate handler if the program terminates while it lives.
/// The handler is installed with the first; it chains to the one it replaced.
void guard_on_terminate(const std::shared_ptr<runtime>& rt);
/// `rt` stopped: nothing left for the handler to end.
void unguard_on_terminate(const runtime* rt) noexcept;

}  // namespace fiber::detail
