#include "backend/slurm/submit_pacing.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

namespace fiber::detail::slurm {
namespace {

std::string_view trimmed(std::string_view s) {
  auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

/// The value of `key=N` among the comma-separated `parameters`; none when absent or not a number.
std::optional<std::size_t> number_of(std::string_view parameters, std::string_view key) {
  while (!parameters.empty()) {
    auto comma = parameters.find(',');
    auto item = trimmed(parameters.substr(0, comma));
    parameters = comma == std::string_view::npos ? std::string_view{} : parameters.substr(comma + 1);
    if (!item.starts_with(key) || item.size() <= key.size() || item[key.size()] != '=') continue;
    auto digits = item.substr(key.size() + 1);
    std::size_t n = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec == std::errc{} && end == digits.data() + digits.size()) return n;
  }
  return std::nullopt;
}

}  // namespace

std::size_t pass_depth_in(std::string_view show_config) {
  std::string_view parameters;
  while (!show_config.empty()) {
    auto eol = show_config.find('\n');
    auto line = show_config.substr(0, eol);
    show_config = eol == std::string_view::npos ? std::string_view{} : show_config.substr(eol + 1);
    auto eq = line.find('=');
    if (eq != std::string_view::npos && trimmed(line.substr(0, eq)) == "SchedulerParameters") {
      parameters = trimmed(line.substr(eq + 1));
      break;
    }
  }
  std::size_t depth = number_of(parameters, "default_queue_depth").value_or(default_pass_depth);
  // 0 means no limit for the two that lower it.
  for (auto key : {"sched_max_job_start", "partition_job_depth"})
    if (auto n = number_of(parameters, key); n && *n > 0) depth = std::min(depth, *n);
  return std::max<std::size_t>(depth, 1);
}

}  // namespace fiber::detail::slurm
