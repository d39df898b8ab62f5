// What the facade (manager/facade.cpp) and the callers (manager/client.cpp) ask of the master's
// side of a manager. Each runs on fiber's loop thread.
#pragma once
#include <atomic>
#include <exception>
#include <memory>

#include "fiber/detail/completion.hpp"
#include "fiber/detail/message.hpp"
#include "fiber/detail/remote_object.hpp"
#include "fiber/detail/unique_function.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {
class manager_core;

std::shared_ptr<manager_core> make_manager_core(std::shared_ptr<runtime> rt, bool async);
/// Starts the server process.
void manager_start(const std::shared_ptr<manager_core>& core);
/// The manager object is gone: calls from now on are told so by the runtime.
void manager_detach(manager_core& core);
/// Asks the server to exit; kills it after terminate_grace_ms. `done` once it is gone.
void manager_shutdown(manager_core& core, unique_function<void()> done);
void manager_when_ready(manager_core& core, unique_function<void(std::exception_ptr)> f);
int manager_pid(const manager_core& core);
/// A call made in the master, through the manager's service (failed when it is gone).
std::shared_ptr<completion<message>> call_at_master(runtime& rt, const object_ref& ref, std::uint64_t method,
                                                    writer& args);

}  // namespace fiber::detail
