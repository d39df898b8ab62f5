/// @file
/// Per-process logging (a file per process when log_file is set).
#pragma once
#include <string_view>

#include "fiber/config.hpp"
#include "fiber/detail/export.hpp"

namespace fiber {
/// Writes `message` to this process's log at `level` (stderr, or its file when log_file is set),
/// when the configured log_level lets it through.
FIBER_API void log(log_level level, std::string_view message);
/// True when a message at `level` would be written: test it before building a costly message.
FIBER_API bool log_enabled(log_level level) noexcept;
}  // namespace fiber
