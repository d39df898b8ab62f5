// What fiber::pool (pool/facade.cpp) asks of the master's side of a pool, beyond the entry points
// its templates use (fiber/detail/pool_sinks.hpp). Each runs on fiber's loop thread.
#pragma once
#include <memory>

#include "fiber/detail/pool_sinks.hpp"
#include "fiber/detail/unique_function.hpp"
#include "fiber/pool_options.hpp"

namespace fiber::detail {

/// No more work; workers leave once the submitted work is done.
void pool_close(pool_core& core);
/// Kills the workers; work not finished fails with errc::closed.
void pool_terminate(pool_core& core);
/// Terminates from any thread without waiting (the pool's destructor).
void pool_terminate_soon(const std::shared_ptr<pool_core>& core);
bool pool_is_open(const pool_core& core);
/// `done` runs once every worker has left / has started.
void pool_when_joined(pool_core& core, unique_function<void()> done);
void pool_when_ready(pool_core& core, unique_function<void()> done);
void pool_resize(pool_core& core, int processes);
pool_stats pool_stats_of(const pool_core& core);

}  // namespace fiber::detail
