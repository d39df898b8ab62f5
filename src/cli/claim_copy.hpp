// `fiber cp SRC DST`: which side is the claim, and where the copy lands. The engine-specific part
// (a helper container or pod that mounts the claim) is the runner's.
#pragma once
#include <filesystem>
#include <string>

#include "cli/run_options.hpp"

namespace fiber::cli {

struct copy_plan {
  bool upload = false;          // local → claim; else claim → local
  std::string claim;            // the claim's (or volume's) name
  std::string in_claim;         // upload: the copy's path in the claim; download: what is copied ("" = all)
  std::filesystem::path local;  // upload: what is sent
  std::filesystem::path local_parent;  // download: the folder the copy goes into ...
  std::string local_name;              // ... under this name
};

/// As `cp`: a destination ending in '/' (or, here, an existing folder) receives the copy under
/// the source's name; otherwise the copy takes the destination's name. fiber::error(config_error)
/// when neither or both sides are CLAIM:PATH, a path leaves its claim (".."), or the local source
/// does not exist.
copy_plan plan_copy(const std::string& src, const std::string& dst);

}  // namespace fiber::cli
