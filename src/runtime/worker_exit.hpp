// How a process fiber started as a child leaves: its output flushed, and never back into the
// user's main() or through the program's static destructors (they belong to the master's run of
// the same program).
#pragma once

namespace fiber::detail {
/// Flushes stdio and ends the process with `code`.
[[noreturn]] void exit_worker(int code);
}  // namespace fiber::detail
