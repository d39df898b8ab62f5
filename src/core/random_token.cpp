#include "core/random_token.hpp"

#include <cstdio>
#include <random>

namespace fiber::detail {

std::string random_token() {
  std::random_device rd;  // the kernel's random source
  std::string t;
  for (int i = 0; i < 4; ++i) {
    char part[9];
    std::snprintf(part, sizeof part, "%08x", static_cast<unsigned>(rd()));
    t += part;
  }
  return t;
}

}  // namespace fiber::detail
