#include "core/process_memory.hpp"

#include <string>

#include <cstdio>
#include <cstring>

namespace fiber::detail {

namespace {
/// Reads the "Name: N kB" lines of a /proc file: `a` and `b` get the bytes of the lines named
/// `a_name` and `b_name` (left as they are where the file has no such line).
void read_kb(const char* path, const char* a_name, std::uint64_t& a, const char* b_name, std::uint64_t& b) {
  std::FILE* f = std::fopen(path, "re");
  if (!f) return;
  char line[256], name[64];
  unsigned long long kb = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "%63[^:]: %llu kB", name, &kb) != 2) continue;
    if (std::strcmp(name, a_name) == 0) a = kb * 1024;
    else if (std::strcmp(name, b_name) == 0) b = kb * 1024;
  }
  std::fclose(f);
}

memory_use memory_in(const char* status_path) {
  memory_use m;
  read_kb(status_path, "VmRSS", m.resident, "VmHWM", m.peak);
  return m;
}
}  // namespace

memory_use this_process_memory() { return memory_in("/proc/self/status"); }

host_memory this_host_memory() {
  host_memory m;
  read_kb("/proc/meminfo", "MemTotal", m.total, "MemAvailable", m.available);
  return m;
}

memory_use process_memory(int pid) {
  if (pid <= 0) return {};
  return memory_in(("/proc/" + std::to_string(pid) + "/status").c_str());
}

}  // namespace fiber::detail
