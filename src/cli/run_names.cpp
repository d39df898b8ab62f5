#include "cli/run_names.hpp"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <random>

#include "fiber/error.hpp"

namespace fiber::cli {

std::string user_name() {
  if (auto* pw = ::getpwuid(::getuid())) return pw->pw_name;
  return std::to_string(::getuid());
}

std::string sanitized_name(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c))) out.push_back(static_cast<char>(std::tolower(c)));
    else if (!out.empty() && out.back() != '-') out.push_back('-');
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  if (out.size() > 40) out.resize(40);
  return out.empty() ? "fiber" : out;
}

std::string default_run_name(const std::string& program) {
  std::random_device rd;
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, "%06x", rd() & 0xffffff);
  return sanitized_name(std::filesystem::path(program).filename().string()) + "-" + suffix;
}

std::string age_since(std::int64_t epoch_seconds) {
  auto s = std::max<std::int64_t>(0, static_cast<std::int64_t>(std::time(nullptr)) - epoch_seconds);
  if (s < 120) return std::to_string(s) + "s";
  if (s < 7200) return std::to_string(s / 60) + "m";
  if (s < 172800) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

void check_run_name(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 63 && std::isalnum(static_cast<unsigned char>(name[0]));
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-');
  if (!ok)
    throw error(errc::config_error, "run name '" + name +
                                        "' is not usable: up to 63 letters, digits and '-', starting with a letter "
                                        "or digit");
}

}  // namespace fiber::cli
