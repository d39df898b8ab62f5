#include "cli/run_options.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "fiber/error.hpp"

namespace fiber::cli {

std::int64_t parse_size(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  std::string unit = end ? end : "";
  for (auto& ch : unit) ch = static_cast<char>(std::tolower(ch));
  if (unit.ends_with("ib")) unit.resize(unit.size() - 2);
  else if (unit.ends_with("i") || unit.ends_with("b")) unit.pop_back();
  double scale = unit.empty() ? 1 : unit == "k" ? 1024.0 : unit == "m" ? 1024.0 * 1024 : unit == "g" ? 1024.0 * 1024 * 1024 : -1;
  if (end == text.c_str() || scale < 0 || !(v > 0) || !std::isfinite(v))
    throw error(errc::config_error, flag + " " + text + " is not a size: a number with K, M or G (512M, 2G)");
  return static_cast<std::int64_t>(v * scale);
}

}  // namespace fiber::cli
