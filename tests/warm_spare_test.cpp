// The fork server's warm spare, driven through the fork server itself: a spare's parent is the
// fork server's parent, which is this test (or a helper it forks, to play a master that dies).
#include "backend/warm_spare.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/zygote.hpp"
#include "core/build_id.hpp"

namespace {
using fiber::detail::zygote;

std::string comm_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  std::getline(in, comm);
  return comm;
}

pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  auto after = line.rfind(')');
  if (after == std::string::npos) return 0;
  char state = 0;
  int ppid = 0;
  if (std::sscanf(line.c_str() + after + 1, " %c %d", &state, &ppid) != 2) return 0;
  return ppid;
}

// A child of this process that fiber's zygote object must have reaped: waitpid finds none.
bool reaped(pid_t pid) { return ::waitpid(pid, nullptr, WNOHANG) == -1 && errno == ECHILD; }

void reap(pid_t pid) {
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

// The children here get an environment without a worker's token: they are forked, find no
// master to serve, and end. What the test looks at is who forked them and when.
const std::vector<std::string> no_job{"FIBER_WARM_SPARE_TEST=1"};

// A fork server that has forked one child, and the spare it forked after it (0s where it could not).
struct served {
  std::unique_ptr<zygote> server;
  pid_t first = 0, spare = 0;
};
served start_with_a_spare() {
  served s{zygote::start(fiber::detail::executable_path())};
  if (s.server && (s.first = s.server->fork_worker(no_job)) > 0) s.spare = s.server->await_spare();
  return s;
}
}  // namespace

TEST(warm_spare, the_next_child_is_the_spare_forked_after_the_last_and_the_last_spare_ends_with_the_fork_server) {
  auto [z, first, spare] = start_with_a_spare();
  ASSERT_GT(first, 0);
  ASSERT_GT(spare, 0);
  EXPECT_NE(spare, first);
  EXPECT_EQ(parent_of(spare), ::getpid());  // the master's child, as every child it asks for
  // Not a worker's name until it is used: the fork server's (inherited), then its own.
  auto name = comm_of(spare);
  EXPECT_TRUE(name == fiber::detail::spare_name || name == fiber::detail::fork_server_name) << name;

  pid_t second = z->fork_worker(no_job);
  EXPECT_EQ(second, spare);
  pid_t next = z->await_spare();
  ASSERT_GT(next, 0);
  EXPECT_NE(next, second);
  reap(first);
  reap(second);

  z.reset();
  EXPECT_TRUE(reaped(next)) << "the spare left when its fork server went was not reaped";
}

TEST(warm_spare, a_spare_killed_from_outside_is_reaped_and_the_next_child_is_forked_when_asked) {
  auto [z, first, spare] = start_with_a_spare();
  ASSERT_GT(first, 0);
  ASSERT_GT(spare, 0);
  ASSERT_EQ(::kill(spare, SIGKILL), 0);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(spare), &info, WEXITED | WNOWAIT), 0);  // dead, not reaped

  pid_t second = z->fork_worker(no_job);
  EXPECT_GT(second, 0);
  EXPECT_NE(second, spare);  // not the dead one
  EXPECT_GT(z->await_spare(), 0);
  EXPECT_TRUE(reaped(spare)) << "the dead spare was left a zombie";
  reap(first);
  if (second > 0) reap(second);
}

// A master that dies leaves no spare behind: the spare is the master's child, and ends with it as
// every worker does. The master here is a helper forked from this test, which it kills.
TEST(warm_spare, a_spare_ends_with_its_master) {
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  pid_t master = ::fork();
  ASSERT_GE(master, 0);
  if (master == 0) {
    ::close(report[0]);
    auto started = start_with_a_spare();
    (void)!::write(report[1], &started.spare, sizeof started.spare);
    for (;;) ::pause();
  }
  ::close(report[1]);
  pid_t spare = 0;
  ASSERT_EQ(::read(report[0], &spare, sizeof spare), static_cast<ssize_t>(sizeof spare));
  ::close(report[0]);
  ASSERT_GT(spare, 0);
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, spare, 0));
  ASSERT_GE(pidfd, 0);
  ::kill(master, SIGKILL);
  reap(master);
  pollfd p{pidfd, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 60000), 1) << "spare " << spare << " outlived its master";  // bounded only against a hang
  ::close(pidfd);
}
