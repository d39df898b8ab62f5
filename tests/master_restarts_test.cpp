// `fiber run --durable --restarts N`'s rule, on the wait statuses of real children: a master that
// died by a signal starts again while restarts are left; one that exited, or that was asked to
// stop (SIGINT, SIGTERM), does not.
#include "cli/master_restarts.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

namespace {
using fiber::cli::master_restarts;

/// The wait status of a child that raises `sig` (0: that exits with `code`).
int status_of(int sig, int code = 0) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (sig) {
      std::signal(sig, SIG_DFL);
      ::raise(sig);
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(master_restarts, a_master_killed_by_a_signal_starts_again_while_restarts_are_left) {
  master_restarts r(2);
  std::string said;
  EXPECT_TRUE(r.again(status_of(SIGKILL), said));
  EXPECT_NE(said.find("signal 9"), std::string::npos) << said;
  EXPECT_NE(said.find("1 restart left"), std::string::npos) << said;
  EXPECT_TRUE(r.again(status_of(SIGSEGV), said));
  EXPECT_NE(said.find("0 restarts left"), std::string::npos) << said;
  EXPECT_FALSE(r.again(status_of(SIGKILL), said)) << "a third restart of two";
}

TEST(master_restarts, a_master_that_exited_or_was_asked_to_stop_does_not) {
  master_restarts r(5);
  std::string said;
  EXPECT_FALSE(r.again(status_of(0, 0), said));
  EXPECT_FALSE(r.again(status_of(0, 3), said));
  EXPECT_FALSE(r.again(status_of(SIGINT), said));
  EXPECT_FALSE(r.again(status_of(SIGTERM), said));
  EXPECT_EQ(r.left(), 5);
}

}  // namespace
