// fiber/log.hpp - per-process logging (a file per process when log_file is set).
#pragma once
#include <string_view>

#include "fiber/config.hpp"

namespace fiber {
void log(log_level level, std::string_view message);
bool log_enabled(log_level level) noexcept;
}  // namespace fiber
