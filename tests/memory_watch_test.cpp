// The resident-memory watch (src/backend/local/memory_watch) over real child processes: one
// that touches more than its limit is reported with what it held; one that only maps a large
// region and starts threads (what RLIMIT_AS refused) is not; no timer runs while nothing has a
// limit. A pass reads every watched process, so a child over its limit tells when the others have
// been read too: no sleeps.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asio/io_context.hpp>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "fiber/error.hpp"
#include "backend/local/memory_watch.hpp"
#include "support.hpp"

namespace {

using fiber::detail::memory_use;
using fiber::detail::memory_watch;
constexpr std::uint64_t mib = 1 << 20;

// A forked child that does `work`, says so on a pipe, and holds on until its parent closes the
// other pipe (or kills it).
class held_child {
 public:
  template <class F>
  explicit held_child(F work) {
    int ready[2], release[2];
    if (::pipe(ready) != 0 || ::pipe(release) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      ::close(release[1]);
      work();
      char c = 1;
      if (::write(ready[1], &c, 1) != 1) ::_exit(2);
      (void)::read(release[0], &c, 1);  // until the parent lets go
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(release[0]);
    release_ = release[1];
    char c = 0;
    if (::read(ready[0], &c, 1) != 1) throw std::runtime_error("the child did not get ready");
    ::close(ready[0]);
  }
  ~held_child() {
    ::close(release_);
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  held_child(const held_child&) = delete;
  held_child& operator=(const held_child&) = delete;
  int pid() const { return pid_; }

 private:
  int pid_ = -1, release_ = -1;
};

void touch(std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) ::_exit(3);
  std::memset(p, 1, bytes);  // resident, and kept until the child exits
}

TEST(memory_watch, a_process_above_its_limit_is_reported_once_with_what_it_held) {
  held_child hog([] { touch(96 * mib); });
  asio::io_context io;
  memory_watch watch(io, std::chrono::milliseconds(10));
  std::optional<memory_use> seen;
  int told = 0;
  watch.watch(hog.pid(), 32, [&](const memory_use& m) {
    seen = m;
    ++told;
  });
  io.run();  // returns once nothing is limited any more: the hog was told and dropped
  ASSERT_TRUE(seen);
  EXPECT_EQ(told, 1);
  EXPECT_GE(seen->resident, 32 * mib);
  EXPECT_GE(seen->peak, 96 * mib);
  EXPECT_EQ(watch.limited(), 0u);
}

TEST(memory_watch, mapping_a_large_region_and_starting_threads_is_not_resident_memory) {
  held_child mapper([] {
    // A gibibyte reserved and never touched, and threads with their stacks: RLIMIT_AS at 64 MiB
    // refused both.
    void* region = ::mmap(nullptr, 1024 * mib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) ::_exit(4);
    static std::vector<std::thread> threads;
    for (int i = 0; i < 16; ++i) threads.emplace_back([] { ::pause(); });
  });
  held_child witness([] { touch(96 * mib); });
  asio::io_context io;
  memory_watch watch(io, std::chrono::milliseconds(10));
  bool mapper_told = false, witness_told = false;
  // 64 MiB over what the child held from its parent at the fork (a sanitizer's process holds more).
  const auto baseline_mb = fiber::detail::process_memory(mapper.pid()).resident / mib;
  watch.watch(mapper.pid(), baseline_mb + 64, [&](const memory_use&) { mapper_told = true; });
  watch.watch(witness.pid(), 32, [&](const memory_use&) {
    witness_told = true;
    io.stop();  // the pass that read the witness read the mapper too
  });
  io.run();
  EXPECT_TRUE(witness_told);
  EXPECT_FALSE(mapper_told);
  EXPECT_EQ(watch.limited(), 1u);  // still watched
}

TEST(memory_watch, no_timer_runs_until_a_process_has_a_limit) {
  held_child hog([] { touch(96 * mib); });
  asio::io_context io;
  memory_watch watch(io, std::chrono::milliseconds(10));
  bool told = false;
  auto id = watch.watch(hog.pid(), 0, [&](const memory_use&) { told = true; });
  EXPECT_EQ(watch.limited(), 0u);
  EXPECT_EQ(io.run(), 0u);  // nothing armed: run returns at once, having run nothing
  watch.set_limit(id, 32);  // the worker took on a function's limit
  io.restart();
  io.run();
  EXPECT_TRUE(told);
}

TEST(memory_watch, an_unwatched_process_is_never_told) {
  held_child hog([] { touch(96 * mib); });
  held_child witness([] { touch(96 * mib); });
  asio::io_context io;
  memory_watch watch(io, std::chrono::milliseconds(10));
  bool hog_told = false;
  auto id = watch.watch(hog.pid(), 32, [&](const memory_use&) { hog_told = true; });
  watch.watch(witness.pid(), 32, [](const memory_use&) {});
  watch.unwatch(id);
  io.run();
  EXPECT_FALSE(hog_told);
}

TEST(memory_watch, a_poll_interval_below_one_millisecond_is_refused_with_the_key) {
  asio::io_context io;
  fiber_test::expect_error([&] { memory_watch w(io, std::chrono::milliseconds(0)); }, fiber::errc::config_error,
                           "memory_poll_ms");
}

}  // namespace
