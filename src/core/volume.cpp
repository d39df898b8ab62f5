#include "core/volume.hpp"

#include "fiber/error.hpp"

namespace fiber::detail {
namespace {
[[noreturn]] void bad_entry(std::string_view entry, std::string_view expected) {
  throw error(errc::config_error, "config key 'volumes': bad value '" + std::string(entry) + "', expected " + std::string(expected));
}
}  // namespace

std::vector<volume> parse_volumes(std::string_view text) {
  std::vector<volume> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto comma = text.find(',', pos);
    auto entry = text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    pos = comma == std::string_view::npos ? text.size() : comma + 1;
    if (entry.empty()) continue;
    volume v;
    auto first = entry.find(':');
    if (first == 0)
      bad_entry(entry, "'source[:/path/in/container][:ro]' (source: a host path, a volume or a claim)");
    v.source = std::string(entry.substr(0, first));
    // "claim", "claim:ro" and "claim:/path[:ro]": the path defaults to /persistent.
    auto rest = first == std::string_view::npos ? std::string_view{} : entry.substr(first + 1);
    std::string_view mode;
    if (rest == "ro" || rest == "rw") {
      mode = rest;
      rest = {};
    } else if (auto second = rest.find(':'); second != std::string_view::npos) {
      mode = rest.substr(second + 1);
      rest = rest.substr(0, second);
      if (mode != "ro" && mode != "rw") bad_entry(entry, "mode ro or rw after the second ':'");
    }
    v.read_only = mode == "ro";
    // A host path with no target is almost always a slip for "/data:/data": say so.
    if (rest.empty() && v.source.starts_with('/'))
      bad_entry(entry, "'/host/path:/path/in/container[:ro]' (only a volume or claim name may leave out the path)");
    v.target = rest.empty() ? std::string(default_volume_target) : std::string(rest);
    if (!v.target.starts_with('/')) bad_entry(entry, "an absolute path in the container after the ':'");
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace fiber::detail
