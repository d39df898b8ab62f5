#include "core/log.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace fiber {
namespace {
struct logger {
  std::mutex mutex;
  std::atomic<log_level> level{log_level::warn};
  std::FILE* file = nullptr;  // nullptr: stderr
  std::string name = "MainProcess";
};
logger& the_logger() {
  static logger* l = new logger;  // never destroyed: usable from static destructors and _exit paths
  return *l;
}
const char* level_name(log_level l) {
  switch (l) {
    case log_level::trace: return "TRACE";
    case log_level::debug: return "DEBUG";
    case log_level::info: return "INFO";
    case log_level::warn: return "WARN";
    case log_level::error: return "ERROR";
    case log_level::off: return "OFF";
  }
  return "?";
}
}  // namespace

bool log_enabled(log_level level) noexcept {
  return level != log_level::off && level >= the_logger().level.load(std::memory_order_relaxed);
}

void log(log_level level, std::string_view message) {
  if (!log_enabled(level)) return;
  auto& l = the_logger();
  auto now = std::chrono::system_clock::now();
  auto t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", &tm);
  std::lock_guard lock(l.mutex);
  std::FILE* out = l.file ? l.file : stderr;
  std::fprintf(out, "%s.%03d %s %s[%d]: %.*s\n", stamp, static_cast<int>(ms), level_name(level), l.name.c_str(),
               static_cast<int>(getpid()), static_cast<int>(message.size()), message.data());
  std::fflush(out);
}

namespace detail {
void configure_log(log_level level, const std::string& file_prefix, const std::string& name) {
  auto& l = the_logger();
  std::lock_guard lock(l.mutex);
  l.level = level;
  l.name = name;
  if (l.file) std::fclose(l.file);
  l.file = nullptr;
  if (!file_prefix.empty()) {
    auto path = file_prefix + "." + name + ".log";
    l.file = std::fopen(path.c_str(), "a");
    if (!l.file) std::fprintf(stderr, "fiber: cannot open log file %s; logging to stderr\n", path.c_str());
  }
}
const std::string& process_name() noexcept { return the_logger().name; }
}  // namespace detail
}  // namespace fiber
