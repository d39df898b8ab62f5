#include "core/process_memory.hpp"

#include <string>

#include <cstdio>
#include <cstring>

namespace fiber::detail {

namespace {
memory_use memory_in(const char* status_path) {
  memory_use m;
  std::FILE* f = std::fopen(status_path, "re");
  if (!f) return m;
  char line[256];
  unsigned long long kb = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "VmRSS: %llu kB", &kb) == 1) m.resident = kb * 1024;
    else if (std::sscanf(line, "VmHWM: %llu kB", &kb) == 1) m.peak = kb * 1024;
  }
  std::fclose(f);
  return m;
}
}  // namespace

memory_use this_process_memory() { return memory_in("/proc/self/status"); }

host_memory this_host_memory() {
  host_memory m;
  std::FILE* f = std::fopen("/proc/meminfo", "re");
  if (!f) return m;
  char line[256];
  unsigned long long kb = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "MemTotal: %llu kB", &kb) == 1) m.total = kb * 1024;
    else if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) m.available = kb * 1024;
  }
  std::fclose(f);
  return m;
}

memory_use process_memory(int pid) {
  if (pid <= 0) return {};
  return memory_in(("/proc/" + std::to_string(pid) + "/status").c_str());
}

}  // namespace fiber::detail
