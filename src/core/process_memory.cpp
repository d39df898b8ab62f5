#include "core/process_memory.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <string_view>

namespace fiber::detail {

namespace {
/// The whole of a small /proc file (status, statm, meminfo are a few KB), or "" where it cannot
/// be read. One read loop, no stdio: a worker reads its own at its end, on its way out.
std::string read_small_file(const char* path) {
  std::string text;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return text;
}

/// The bytes of the "Name:   N kB" line called `name` (with its colon), or `fallback`.
std::uint64_t kb_line(std::string_view text, std::string_view name, std::uint64_t fallback) {
  for (std::size_t at = 0; at < text.size();) {
    auto end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    auto line = text.substr(at, end - at);
    if (line.substr(0, name.size()) == name) {
      std::string digits(line.substr(name.size()));
      char* stop = nullptr;
      auto kb = std::strtoull(digits.c_str(), &stop, 10);
      return stop == digits.c_str() ? fallback : kb * 1024;
    }
    at = end + 1;
  }
  return fallback;
}

memory_use memory_in(const char* status_path) {
  auto text = read_small_file(status_path);
  return {kb_line(text, "VmRSS:", 0), kb_line(text, "VmHWM:", 0)};
}
}  // namespace

// The second field of statm is VmRSS in pages, and getrusage's ru_maxrss is VmHWM in KB: two
// short answers from the kernel instead of the fifty lines of status it would format.
memory_use this_process_memory() {
  memory_use m;
  auto statm = read_small_file("/proc/self/statm");
  if (auto space = statm.find(' '); space != std::string::npos)
    m.resident = std::strtoull(statm.c_str() + space + 1, nullptr, 10) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  rusage use{};
  if (::getrusage(RUSAGE_SELF, &use) == 0) m.peak = static_cast<std::uint64_t>(use.ru_maxrss) * 1024;
  if (m.peak < m.resident) m.peak = m.resident;  // read a moment apart
  return m;
}

host_memory this_host_memory() {
  auto text = read_small_file("/proc/meminfo");
  return {kb_line(text, "MemTotal:", 0), kb_line(text, "MemAvailable:", 0)};
}

memory_use process_memory(int pid) {
  if (pid <= 0) return {};
  return memory_in(("/proc/" + std::to_string(pid) + "/status").c_str());
}

}  // namespace fiber::detail
