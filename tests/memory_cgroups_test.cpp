// The local backend's memory cgroups (src/backend/local/memory_cgroups) over real processes and
// the kernel's own v1 memory controller: a child that reaches its limit is held there and
// reported at once with its peak, the kernel's OOM killer never fires, a group goes with its
// process and the master's folder with the last group, and a dead master's folder is removed by
// the next. Where this host does not let fiber make groups (no v1 memory controller, not root),
// make() must say why: that is what these tests then check, and the local backend watches
// memory instead (memory_watch_test).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asio/io_context.hpp>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "backend/local/memory_cgroups.hpp"
#include "support.hpp"

namespace {

using fiber::detail::memory_cgroups;
using fiber::detail::memory_use;
namespace fs = std::filesystem;
constexpr std::uint64_t mib = 1 << 20;

/// A forked child that touches `mb` MiB once its parent says go (after it was put in a group).
class waiting_hog {
 public:
  explicit waiting_hog(std::size_t mb) {
    int go[2];
    if (::pipe(go) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(go[1]);
      char c = 0;
      if (::read(go[0], &c, 1) != 1) ::_exit(2);
      void* p = ::mmap(nullptr, mb * mib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) ::_exit(3);
      std::memset(p, 1, mb * mib);
      ::_exit(0);  // only if the limit did not hold it
    }
    ::close(go[0]);
    go_ = go[1];
  }
  ~waiting_hog() {
    ::close(go_);
    kill_and_reap();
  }
  waiting_hog(const waiting_hog&) = delete;
  waiting_hog& operator=(const waiting_hog&) = delete;
  void go() {
    char c = 1;
    if (::write(go_, &c, 1) != 1) throw std::runtime_error("write");
  }
  /// Its wait status; -1 once reaped.
  int kill_and_reap() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  int pid() const { return pid_; }

 private:
  int pid_ = -1, go_ = -1;
};

/// Groups, or the reason there are none (then checked instead).
std::shared_ptr<memory_cgroups> groups_or_reason(asio::io_context& io) {
  std::string why_not;
  auto groups = memory_cgroups::make(io, why_not);
  if (!groups) {
    EXPECT_FALSE(why_not.empty()) << "no groups and no reason";
    EXPECT_TRUE(why_not.find("cgroup") != std::string::npos || why_not.find("cannot make") != std::string::npos)
        << why_not;
  }
  return groups;
}

TEST(memory_cgroups, a_child_at_its_limit_is_held_there_and_reported_at_once_with_its_peak) {
  asio::io_context io;
  auto groups = groups_or_reason(io);
  if (!groups) return;  // checked: the reason
  auto kills_before = fiber_test::oom_kills();
  waiting_hog hog(256);
  std::optional<memory_use> seen;
  auto id = groups->limit(hog.pid(), 64, [&](const memory_use& m) {
    seen = m;
    io.stop();
  });
  ASSERT_NE(id, 0u);
  auto dir = groups->folder() / std::to_string(id);
  EXPECT_TRUE(fs::exists(dir / "memory.limit_in_bytes"));
  hog.go();
  io.run();  // until the group's OOM event
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->peak, 64 * mib) << "held at its limit, never past it";
  auto status = hog.kill_and_reap();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "it was held, not ended by the kernel: " << status;
  EXPECT_EQ(fiber_test::oom_kills(), kills_before) << "the kernel's OOM killer chose a process";
  groups->release(id);
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_EQ(groups->size(), 0u);
}

TEST(memory_cgroups, a_child_within_its_limit_is_never_reported_and_the_folder_goes_with_the_groups) {
  asio::io_context io;
  auto groups = groups_or_reason(io);
  if (!groups) return;
  auto folder = groups->folder();
  waiting_hog small(16);
  bool told = false;
  auto id = groups->limit(small.pid(), 64, [&](const memory_use&) { told = true; });
  ASSERT_NE(id, 0u);
  small.go();
  int status = 0;
  ::waitpid(small.pid(), &status, 0);  // it touched its 16 MiB and exited
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  io.poll();
  EXPECT_FALSE(told);
  groups->release(id);
  groups.reset();
  EXPECT_FALSE(fs::exists(folder)) << "the master's folder goes with its groups";
}

TEST(memory_cgroups, the_folder_a_dead_master_left_is_removed_by_the_next) {
  asio::io_context io;
  auto groups = groups_or_reason(io);
  if (!groups) return;
  // A master that died without removing its folder: a pid that is surely gone (reaped here).
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  auto stale = groups->folder().parent_path() / ("fiber-" + std::to_string(dead));
  ASSERT_EQ(::mkdir(stale.c_str(), 0755), 0) << std::strerror(errno);
  ASSERT_EQ(::mkdir((stale / "1").c_str(), 0755), 0) << std::strerror(errno);
  // ... with a group inside its child's (a nested master's, killed with its worker)
  ASSERT_EQ(::mkdir((stale / "1" / "fiber-1").c_str(), 0755), 0) << std::strerror(errno);
  groups.reset();
  groups = groups_or_reason(io);  // the next master of this host
  ASSERT_TRUE(groups);
  EXPECT_FALSE(fs::exists(stale));
}

}  // namespace
