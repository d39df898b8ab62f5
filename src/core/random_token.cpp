#include "core/random_token.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace fiber::detail {

// getrandom(2) is the kernel's generator, seeded before any process runs: one call, no
// descriptor (std::random_device may answer from the CPU's RDRAND instead, and costs a
// construction each time).
std::string random_token() {
  std::uint8_t bytes[16];
  for (std::size_t got = 0; got < sizeof bytes;) {
    auto n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "getrandom failed; fiber needs Linux 3.17 or newer");
    }
    got += static_cast<std::size_t>(n);
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string t(2 * sizeof bytes, '0');
  for (std::size_t i = 0; i < sizeof bytes; ++i) {
    t[2 * i] = hex[bytes[i] >> 4];
    t[2 * i + 1] = hex[bytes[i] & 0xf];
  }
  return t;
}

}  // namespace fiber::detail
