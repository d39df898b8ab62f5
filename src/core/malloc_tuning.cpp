#include "core/malloc_tuning.hpp"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace fiber::detail {

void keep_freed_memory(std::uint64_t mib) noexcept {
  if (mib == 0) return;
  if (const char* t = std::getenv("GLIBC_TUNABLES"); t && std::strstr(t, "glibc.malloc.")) return;
#ifdef M_TRIM_THRESHOLD
  constexpr std::uint64_t mmap_max = std::uint64_t{32} << 20;  // glibc's upper bound on 64-bit
  auto keep = std::min<std::uint64_t>(mib << 20, std::uint64_t{1} << 40);
  ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(std::min(mmap_max, keep)));
  ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(std::min<std::uint64_t>(keep, std::uint64_t{1} << 30)));
  ::mallopt(M_TOP_PAD, static_cast<int>(std::min<std::uint64_t>(keep / 4, std::uint64_t{64} << 20)));
#endif
}

}  // namespace fiber::detail
