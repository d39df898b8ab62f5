// The files of one test process go under a folder of its own, named by a random word and not by
// its pid: the master-in-pod runs share this host's /tmp through hostPath, and pids repeat from
// pod to pod (every pod's first processes have small ones). Children in containers, pods and Slurm
// jobs see the folder at the same path, since /tmp is shared with them.
#pragma once
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>

namespace fiber_test {

namespace detail {
struct run_folder_state {
  std::string id;
  std::filesystem::path path;
  pid_t owner = 0;
};
inline run_folder_state& run_folder_made() {
  // Never destroyed: the exit handler below reads it after the statics are gone.
  static run_folder_state& state = *[] {
    auto* s = new run_folder_state;
    std::random_device random;
    for (int attempt = 0; attempt < 100; ++attempt) {
      char word[9];
      std::snprintf(word, sizeof word, "%08x", static_cast<unsigned>(random()));
      auto path = std::filesystem::temp_directory_path() / ("fiber-test-" + std::string(word));
      if (::mkdir(path.c_str(), 0700) == 0) {
        *s = {word, path, ::getpid()};
        // Removed when this process ends; not by a child forked from it, whose exit runs the
        // same handlers.
        std::atexit([] {
          auto& made = run_folder_made();
          std::error_code ec;
          if (::getpid() == made.owner) std::filesystem::remove_all(made.path, ec);
        });
        return s;
      }
      if (errno != EEXIST)
        throw std::system_error(errno, std::generic_category(), "making the test folder " + path.string());
    }
    throw std::runtime_error("no free name for a test folder under " + std::filesystem::temp_directory_path().string());
  }();
  return state;
}
}  // namespace detail

/// This test process's own folder, made (0700) at first use and removed at its exit.
inline const std::filesystem::path& run_folder() { return detail::run_folder_made().path; }

/// A word unique to this test process (8 hex digits), for names outside the file system that must
/// not collide with another run's: Kubernetes namespaces, Docker volumes, fiber run names.
inline const std::string& run_id() { return detail::run_folder_made().id; }

}  // namespace fiber_test
