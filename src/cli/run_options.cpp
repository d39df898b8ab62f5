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

std::optional<claim_path> parse_claim_path(const std::string& text) {
  auto colon = text.find(':');
  if (colon == std::string::npos || colon == 0 || text[0] == '.' || text[0] == '/') return std::nullopt;
  for (std::size_t i = 0; i < colon; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (!std::isalnum(c) && c != '_' && c != '.' && c != '-') return std::nullopt;
  }
  return claim_path{text.substr(0, colon), text.substr(colon + 1)};
}

}  // namespace fiber::cli
