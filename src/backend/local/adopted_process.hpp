// A process on this host that an earlier master of a durable run started and this master took
// up (its worker waited for it): a job like a local child's, watched through a pidfd, signalled
// through it, but not this process's child. Its exit status belongs to whoever its parent became
// (init, or a subreaper): its end is seen, its code is not, and is reported as 0 with words that
// say so (a worker that ended on its own said `done` before).
#pragma once
#include <asio/io_context.hpp>
#include <memory>

#include "backend/backend.hpp"

namespace fiber::detail {

/// A job over process `pid`. Throws fiber::error(spawn_failed) when it is already gone.
std::unique_ptr<job> adopt_local_process(asio::io_context& io, int pid);

}  // namespace fiber::detail
