// The entries of config::volumes ("src[:/path][:ro],..."), as the container engines and the
// `fiber` command mount them.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace fiber::detail {

/// Where a volume is mounted when its entry names no path.
inline constexpr std::string_view default_volume_target = "/persistent";

/// One entry of config::volumes.
struct volume {
  std::string source;  // host path (starts with '/'), a volume name (docker) or a claim (kubernetes)
  std::string target;  // absolute path in the container
  bool read_only = false;
};

/// Parses config::volumes; fiber::error(config_error) naming the bad entry.
std::vector<volume> parse_volumes(std::string_view text);

}  // namespace fiber::detail
