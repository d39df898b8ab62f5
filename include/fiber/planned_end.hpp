/// @file
/// Whether this pool worker has been told of its planned end: a Slurm job's time limit coming, its
/// pod evicted or deleted, `docker stop` (docs/backends.md, "Planned endings").
#pragma once
#include "fiber/detail/export.hpp"

namespace fiber {

/// True in a pool worker once its engine has announced its end. The worker then takes no new
/// work and hands back what it holds; the item it runs finishes if its `task_estimate` fits in
/// the notice. An item that runs long can look between its steps and save what it has done (a
/// checkpoint its next run starts from), so that its run elsewhere does not start over. False in
/// any other process, and before a notice.
FIBER_API bool planned_end_notified() noexcept;

}  // namespace fiber
