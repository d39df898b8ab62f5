// How a process fiber started as a child leaves: its output flushed, and never back into the
// user's main() or through the program's static destructors (they belong to the master's run of
// the same program).
#pragma once

namespace fiber::detail {
/// Flushes stdio and ends the process with `code`.
[[noreturn]] void exit_worker(int code);
/// The code a worker whose target returned exits with (0 unless set; 1 when it raised): a pool
/// worker that handed its work back says so with exit_drained, which reaches the master even
/// where its last message does not.
void set_clean_exit_code(int code) noexcept;
int clean_exit_code() noexcept;
}  // namespace fiber::detail
