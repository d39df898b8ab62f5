// What the top master's spawn service starts for the tree's nested masters: the run's own program
// as a worker, with fiber's own environment, no deeper than max_depth. The service takes its asks
// from the links of its children, so a process that got in (or a task's code) must not make it
// start another program, set what a loader or shell reads (LD_PRELOAD, BASH_ENV), or grow the tree
// without bound.
#pragma once
#include <string>

#include "backend/backend.hpp"

namespace fiber::detail {

struct spawn_limits {
  std::string program;  // the run's own executable (config `executable`, else this program)
  int max_depth = 0;    // config max_depth
};

/// Why `spec`, asked to start at `depth` of the tree (the master is 0), is refused; empty when it
/// may start.
std::string spawn_refusal(const spawn_spec& spec, int depth, const spawn_limits& limits);

}  // namespace fiber::detail
