// Shared test helpers.
#pragma once
#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

namespace fiber_test {
/// Pids of this process's children, live or zombie, read from /proc.
inline std::vector<int> child_pids() {
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
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == me) out.push_back(pid);
  }
  closedir(d);
  return out;
}
}  // namespace fiber_test
