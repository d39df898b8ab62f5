// Whether an engine runs, judged by the engine's own tools and never by fiber's code under test:
// a test may skip only because an engine is truly absent, and once the engine answers, a failure
// of fiber's code (fiber's docker_engine, its run_command of sinfo) is a failure of the test.
#pragma once
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

extern char** environ;

namespace fiber_test {

struct tool_answer {
  int status = -1;  // the exit status; -1 when it could not be started or was killed
  std::string out;  // stdout and stderr together
};

/// Runs a tool (found on PATH) to its end with posix_spawnp: not fiber::detail::run_command,
/// which is part of what the suites test.
inline tool_answer run_tool(const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  ::posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  ::posix_spawn_file_actions_addclose(&actions, fds[0]);
  ::posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int spawned = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  tool_answer answer;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR);)
    if (n > 0) answer.out.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  if (spawned != 0) {
    answer.out = argv[0] + ": cannot be started (" + std::string(std::strerror(spawned)) + ")";
    return answer;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  answer.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return answer;
}

/// Empty when a Docker engine answers its API's ping (curl on its socket, or the docker command
/// for a tcp:// DOCKER_HOST); else what was tried and what it said.
inline std::string docker_absent() {
  std::string host = std::getenv("DOCKER_HOST") ? std::getenv("DOCKER_HOST") : "";
  tool_answer a;
  if (host.empty() || host.starts_with("unix://")) {
    std::string socket = host.empty() ? "/var/run/docker.sock" : host.substr(7);
    a = run_tool({"curl", "-s", "--max-time", "10", "--unix-socket", socket, "http://localhost/_ping"});
    if (a.status == 0 && a.out == "OK") return {};
    return "the engine's socket " + socket + " does not answer its ping (curl: exit " + std::to_string(a.status) +
           (a.out.empty() ? "" : ", " + a.out.substr(0, 200)) + ")";
  }
  a = run_tool({"docker", "version", "--format", "{{.Server.Version}}"});
  if (a.status == 0) return {};
  return "`docker version` at DOCKER_HOST=" + host + " says: " + a.out.substr(0, 300);
}

/// Empty when Slurm's own sinfo (run directly) shows a node that is up: idle, allocated, mixed,
/// completing (ending a job, as both nodes are for a moment after a test cancels its jobs), or
/// planned (idle, a pending job planned on it); else what sinfo said.
inline std::string slurm_absent() {
  auto a = run_tool({"sinfo", "-h", "-o", "%T"});
  if (a.status != 0) return "sinfo: exit " + std::to_string(a.status) + ": " + a.out.substr(0, 300);
  for (std::string_view up : {"idle", "mix", "alloc", "completing", "planned"})
    if (a.out.find(up) != std::string::npos) return {};
  return "no node is up (sinfo: " + a.out + ")";
}

}  // namespace fiber_test
