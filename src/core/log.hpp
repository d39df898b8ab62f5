// Internal logging helpers.
#pragma once
#include <sstream>
#include <string>

#include "fiber/log.hpp"

namespace fiber::detail {
/// Sets the level, the file prefix and the name of this process.
void configure_log(log_level level, const std::string& file_prefix, const std::string& process_name);
const std::string& process_name() noexcept;

template <class... A>
void logf(log_level level, const A&... parts) {
  if (!log_enabled(level)) return;
  std::ostringstream s;
  (s << ... << parts);
  log(level, s.str());
}
}  // namespace fiber::detail
