// Comparing a secret a peer sent with ours.
#pragma once
#include <cstddef>
#include <string_view>

namespace fiber::detail {

/// Equal secrets, compared without an early exit: the time taken says nothing about where a
/// guess differs.
inline bool same_secret(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace fiber::detail
