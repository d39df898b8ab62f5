// Keeps freed memory in the process for reuse (glibc malloc), so that the buffers of large
// messages are not handed back to the kernel after each one: in a process with several threads
// each hand-back (munmap, or brk shrinking the heap) flushes the TLB on every core, and the next
// message faults its pages in again. Profiled, this was 80 % of an evolution-strategies round.
#pragma once
#include <cstdint>

namespace fiber::detail {

/// Up to `mib` MiB of freed memory stays in the process; allocations below 32 MiB come from the
/// heap (reused) rather than from mmap (returned at once). 0 leaves malloc as it is, and so does
/// a GLIBC_TUNABLES that sets glibc.malloc keys: the user's own tuning wins.
void keep_freed_memory(std::uint64_t mib) noexcept;

}  // namespace fiber::detail
