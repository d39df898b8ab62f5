// Running the `fiber` command in tests (tests/cli_test.cpp on Docker, cli_slurm_test.cpp on Slurm).
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "backend/command.hpp"

namespace fiber_test {

struct command_outcome {
  int code = -1;
  std::string out;  // stdout and stderr together
};

/// The fiber command with `args` (shell words), run to its end; `env`: "K=V ..." before it.
inline command_outcome fiber_cmd(const std::string& args, const std::string& env = {}) {
  std::string cmd = env + " " FIBER_TEST_CLI " " + args + " 2>&1";
  command_outcome r;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
    int status = ::pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  return r;
}

/// Starts the fiber command with `argv` (after the program), reads its stdout until a whole line
/// that `wanted` accepts, then stops it with SIGINT (a follow detaches): that line, or "" when the
/// command ended first.
template <class Pred>
std::string line_of(const std::vector<std::string>& argv, Pred wanted) {
  std::vector<std::string> full{FIBER_TEST_CLI};
  full.insert(full.end(), argv.begin(), argv.end());
  auto child = fiber::detail::spawn_command(full, {.pipe_stdout = true});
  std::string seen, found;
  char buf[4096];
  while (found.empty()) {
    auto nl = seen.find('\n');
    if (nl != std::string::npos) {
      auto line = seen.substr(0, nl);
      seen.erase(0, nl + 1);
      if (wanted(line)) found = line;
      continue;
    }
    auto n = ::read(child.stdout_fd, buf, sizeof buf);
    if (n <= 0) break;
    seen.append(buf, static_cast<std::size_t>(n));
  }
  ::kill(child.pid, SIGINT);
  ::close(child.stdout_fd);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  return found;
}

/// A line of digits only (what tests/orphan_master.cpp prints once its child runs).
inline bool a_pid(const std::string& line) {
  return !line.empty() && line.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace fiber_test
