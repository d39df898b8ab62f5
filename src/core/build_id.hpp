#pragma once
#include <string>

namespace fiber::detail {
/// The executable's ELF NT_GNU_BUILD_ID as hex, or "" when it has none.
const std::string& build_id();
/// Path of the running executable.
const std::string& executable_path();
}  // namespace fiber::detail
