// What `ps` shows for a child: its arguments, which for a worker forked from the fork server
// read "--fiber-zygote" for every child. A worker rewrites them in place to its own name and its
// program's ("PoolWorker-1-2 pi_estimation"), as setproctitle does, within the space the
// arguments had (nothing past them, where the environment lies, is touched).
#pragma once
#include <string>
#include <string_view>

namespace fiber::detail {

/// Remembers main's arguments (fiber::init) for name_this_process.
void remember_arguments(int argc, char** argv) noexcept;
/// Overwrites the contiguous arguments of `argv` with `title`, cut to fit, the rest zeroed;
/// returns what was written.
std::string set_process_title(int argc, char** argv, std::string_view title) noexcept;
/// This worker's title: `name` and its program's file name, in the arguments remembered.
void name_this_process(std::string_view name) noexcept;

}  // namespace fiber::detail
