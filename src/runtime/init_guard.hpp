// The guard against a program that does not call fiber::init first: its children run the same
// program again and would start children of their own, so a master refuses to start any, and a
// child that got as far as main() ends at once, saying why.
#pragma once

namespace fiber::detail {
/// Set by fiber::init in a master.
bool& init_was_called();
/// In a process fiber started as a child, ends the process (running main again would start
/// children of its own); in a master, throws before any child is started.
void require_init();
}  // namespace fiber::detail
