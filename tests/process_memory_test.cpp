// What a process holds in RAM now and at most (core/process_memory): read for this process from
// statm and getrusage, for another from its /proc status, and the host's from meminfo.
#include "core/process_memory.hpp"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

using namespace fiber::detail;

namespace {
constexpr std::size_t mib = 1024 * 1024;

/// `bytes` of fresh anonymous memory, every page written, so that all of it is resident.
char* touched(std::size_t bytes) {
  auto* p = static_cast<char*>(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (p == MAP_FAILED) return nullptr;
  std::memset(p, 1, bytes);
  return p;
}
}  // namespace

TEST(process_memory, this_process_holds_what_it_touched_and_its_peak_stays_after_it_gave_it_back) {
  auto before = this_process_memory();
  ASSERT_GT(before.resident, 0u);
  ASSERT_GE(before.peak, before.resident);

  char* block = touched(64 * mib);
  ASSERT_NE(block, nullptr);
  auto holding = this_process_memory();
  EXPECT_GE(holding.resident, before.resident + 60 * mib);
  EXPECT_GE(holding.peak, holding.resident);

  ::munmap(block, 64 * mib);
  auto after = this_process_memory();
  EXPECT_LE(after.resident + 60 * mib, holding.resident);
  // The most it held, not what it holds. The kernel's counts are summed from per-CPU batches, so
  // two reads may differ by a few pages: the block is what must show.
  EXPECT_GE(after.peak, before.resident + 60 * mib);
}

TEST(process_memory, another_process_is_read_from_its_status) {
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char* block = touched(48 * mib);
    char c = block ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    (void)!::read(done[0], &c, 1);  // hold it until the parent has looked
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto m = process_memory(child);
  EXPECT_GE(m.resident, 48 * mib);
  EXPECT_GE(m.peak, m.resident);
  ASSERT_EQ(::write(done[1], "x", 1), 1);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  for (int fd : {ready[0], ready[1], done[0], done[1]}) ::close(fd);
}

TEST(process_memory, a_process_that_is_not_there_reads_as_zeros) {
  auto m = process_memory(-1);
  EXPECT_EQ(m.resident, 0u);
  EXPECT_EQ(m.peak, 0u);
  int pid_max = 0;  // pids are below it: it names no process
  if (FILE* f = std::fopen("/proc/sys/kernel/pid_max", "r")) {
    ASSERT_EQ(std::fscanf(f, "%d", &pid_max), 1);
    std::fclose(f);
  }
  ASSERT_GT(pid_max, 0);
  m = process_memory(pid_max);
  EXPECT_EQ(m.resident, 0u);
  EXPECT_EQ(m.peak, 0u);
}

TEST(process_memory, the_host_has_memory_and_some_of_it_is_available) {
  auto h = this_host_memory();
  EXPECT_GT(h.total, 0u);
  EXPECT_GT(h.available, 0u);
  EXPECT_LE(h.available, h.total);
}
