// Children of this process, read from /proc (shared by tests and benchmarks).
#pragma once
#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace fiber_test {
/// True for fiber's fork server and the spare it keeps forked for the next child (by their
/// process names), which belong to a context and end with it. The children it hands out are
/// named otherwise, so they still count as children.
inline bool is_fork_server(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  std::getline(in, comm);
  return comm == "fiber-forksrv" || comm == "fiber-spare";
}

/// True for a Slurm client command the Slurm backend of a context that lives on runs now and
/// then (a poll, a cancel): it is not a child process that was left behind. srun, which is a
/// child's step, still counts.
inline bool is_slurm_query(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  std::getline(in, comm);
  return comm == "squeue" || comm == "scancel" || comm == "sbatch" || comm == "sinfo" || comm == "scontrol";
}

/// True for a child forked by this process that has not exec'd yet: it shares this process's
/// memory, so its command line is still this process's own (a worker fiber starts, or a Slurm
/// query, runs with arguments of its own once it exec'd). The backends start their commands from
/// threads of their own, so one may be between its fork and its exec when a test ends; what it
/// becomes ends with its command (a query) or is a child of its own again (a worker's step).
inline bool is_before_exec(int pid) {
  auto cmdline = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  auto theirs = cmdline("/proc/" + std::to_string(pid) + "/cmdline");
  return !theirs.empty() && theirs == cmdline("/proc/self/cmdline");
}

/// Pids of this process's children, live or zombie, read from /proc; fiber's fork servers are
/// listed only when `with_fork_servers`; the Slurm backend's queries and children not yet exec'd never.
inline std::vector<int> child_pids(bool with_fork_servers = false) {
  std::vector<int> out;
  auto me = getpid();
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (auto* e = readdir(d)) {
    int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == me &&
        (with_fork_servers || !is_fork_server(pid)) && !is_slurm_query(pid) && !is_before_exec(pid))
      out.push_back(pid);
  }
  closedir(d);
  return out;
}

}  // namespace fiber_test
