// Waiting for what processes write into a folder, woken by the kernel at each change (inotify),
// never on a timer: the tests' one way to wait for another process's step.
#pragma once
#include <sys/inotify.h>
#include <unistd.h>

#include <filesystem>

namespace fiber_test {

/// Waits until `done()` holds, checked at each change in `folder` (inotify), never on a timer.
template <class Pred>
inline void wait_in(const std::filesystem::path& folder, Pred done) {
  std::filesystem::create_directories(folder);
  int fd = ::inotify_init1(IN_CLOEXEC);
  ::inotify_add_watch(fd, folder.c_str(), IN_MODIFY | IN_CREATE | IN_CLOSE_WRITE);
  char events[4096];
  while (!done()) (void)!::read(fd, events, sizeof events);
  ::close(fd);
}

}  // namespace fiber_test
