// A durable run's master told of its planned end (durable/master_notice): its journal is synced
// before anything else; a SIGTERM then ends it as SIGTERM would have; Slurm's SIGURG has it ask
// Slurm to requeue its job, and it goes on until Slurm ends it. Real signals, in forked children.
#include "primitives/durable/master_notice.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

namespace {
using fiber::detail::master_notice;

TEST(master_notice, a_sigterm_ends_the_master_by_it_and_slurms_notice_requeues_its_job) {
  auto term = master_notice::plan_for(SIGTERM, "42");
  EXPECT_TRUE(term.end_by_signal);
  EXPECT_TRUE(term.command.empty());
  auto urg = master_notice::plan_for(SIGURG, "42");
  EXPECT_FALSE(urg.end_by_signal) << "Slurm's requeue ends the master";
  EXPECT_EQ(urg.command, (std::vector<std::string>{"scontrol", "requeue", "42"}));
  EXPECT_TRUE(master_notice::plan_for(SIGURG, "").command.empty()) << "outside Slurm, nothing to requeue";
}

/// Forks a master that arms the notice (its sync writes a byte to a pipe), raises `sig`, and runs
/// its loop once; what the parent read from the pipe, and the child's status.
std::pair<int, int> notice_in_child(int sig) {
  int synced[2];
  if (::pipe(synced) != 0) return {-1, -1};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(synced[0]);
    ::unsetenv("SLURM_JOB_ID");
    asio::io_context io;
    bool done = false;
    master_notice notice(io, [fd = synced[1], &done] { done = (::write(fd, "s", 1) == 1); }, "run-1");
    ::raise(sig);
    while (!done) io.run_one();  // until the notice's handler has run
    std::_Exit(0);
  }
  ::close(synced[1]);
  char byte = 0;
  int n = static_cast<int>(::read(synced[0], &byte, 1));
  ::close(synced[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {n, status};
}

TEST(master_notice, the_journal_is_synced_before_a_sigterm_ends_the_master) {
  auto [synced, status] = notice_in_child(SIGTERM);
  EXPECT_EQ(synced, 1) << "the journal was not synced";
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(master_notice, outside_slurm_its_notice_syncs_the_journal_and_the_master_goes_on) {
  auto [synced, status] = notice_in_child(SIGURG);
  EXPECT_EQ(synced, 1);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
