#include "core/process_memory.hpp"

#include <cstdio>
#include <cstring>

namespace fiber::detail {

memory_use this_process_memory() {
  memory_use m;
  std::FILE* f = std::fopen("/proc/self/status", "re");
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

}  // namespace fiber::detail
