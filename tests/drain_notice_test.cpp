// A pool worker's notice of its planned end (pool/drain_notice): what it decides for the item that
// runs at the notice, and, in forked children given real signals, what it does: an idle worker is
// woken; an item known not to fit is handed back at once (exit_drained); one that fits is left to
// finish; a SIGTERM from the worker's parent is its pool's stop and ends it as before.
#include "primitives/pool/drain_notice.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <future>

#include "core/worker_env.hpp"
#include "fiber/planned_end.hpp"

namespace {
using fiber::detail::drain_notice;
using namespace std::chrono_literals;

TEST(drain_notice, an_item_known_not_to_fit_is_handed_back_at_once_and_one_that_fits_may_finish) {
  auto v = drain_notice::decide(30s, 60s);
  EXPECT_TRUE(v.hand_back_now);
  v = drain_notice::decide(30s, 5s);
  EXPECT_FALSE(v.hand_back_now);
  EXPECT_EQ(v.wait_until_ago, 30s - drain_notice::margin(30s)) << "it may run until the margin";
  // Half the notice gone: what is left decides.
  EXPECT_TRUE(drain_notice::decide(30s, 20s, 15s).hand_back_now);
  EXPECT_FALSE(drain_notice::decide(30s, 10s, 15s).hand_back_now);
}

TEST(drain_notice, an_item_of_unknown_length_runs_until_the_notice_is_nearly_out) {
  auto v = drain_notice::decide(30s, 0s);
  EXPECT_FALSE(v.hand_back_now);
  EXPECT_EQ(v.wait_until_ago, 28s) << "30 s less the margin, 2 s at most";
  EXPECT_TRUE(drain_notice::decide(30s, 0s, 28s).hand_back_now);
  EXPECT_TRUE(drain_notice::decide(0s, 0s).hand_back_now) << "no notice: nothing can finish";
  EXPECT_EQ(drain_notice::margin(10min), 2s) << "the margin is at most 2 s";
}

/// Runs `child` in a forked process; its exit status.
template <class F>
int in_child(F child) {
  pid_t pid = ::fork();
  if (pid == 0) {
    child();
    std::_Exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(drain_notice, a_notice_wakes_an_idle_worker_and_says_which_signal_gave_it) {
  for (int sig : {SIGTERM, SIGURG}) {
    int status = in_child([sig] {
      std::promise<void> woken;
      auto& notice = drain_notice::arm(std::chrono::milliseconds(30000), 0, true, [&woken] { woken.set_value(); });
      if (notice.given() || fiber::planned_end_notified()) std::_Exit(10);
      ::raise(sig);
      woken.get_future().wait();
      std::_Exit(notice.given() && notice.signal_number() == sig && fiber::planned_end_notified() ? 0 : 11);
    });
    ASSERT_TRUE(WIFEXITED(status)) << "signal " << sig << ": ended by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0) << "signal " << sig;
  }
}

TEST(drain_notice, an_item_that_will_not_fit_is_handed_back_with_exit_drained) {
  int status = in_child([] {
    auto& notice = drain_notice::arm(std::chrono::milliseconds(30000), 0, true, [] {});
    notice.task_begins(std::chrono::hours(1));
    ::raise(SIGTERM);
    for (;;) ::pause();  // the item: only the watch ends it
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), fiber::detail::exit_drained);
}

TEST(drain_notice, an_item_that_fits_finishes_and_the_worker_leaves_by_itself) {
  int status = in_child([] {
    std::promise<void> woken;
    auto& notice = drain_notice::arm(std::chrono::milliseconds(60000), 0, true, [&woken] { woken.set_value(); });
    notice.task_begins(std::chrono::seconds(1));
    ::raise(SIGTERM);
    woken.get_future().wait();  // the watch has the notice, and leaves the item be
    notice.item_done();
    notice.task_ends();
    std::_Exit(notice.given() ? 0 : 12);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(drain_notice, a_sigterm_from_the_parent_is_the_pools_stop_and_ends_the_worker_as_before) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    drain_notice::arm(std::chrono::milliseconds(30000), ::getppid(), true, [] { std::_Exit(13); });
    char byte = 1;
    if (::write(ready[1], &byte, 1) != 1) std::_Exit(14);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char byte;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(drain_notice, in_a_slurm_job_a_sigterm_is_a_cancellation_and_only_its_notice_drains) {
  int status = in_child([] {
    drain_notice::arm(std::chrono::milliseconds(30000), 0, /*term_is_notice=*/false, [] { std::_Exit(17); });
    ::raise(SIGTERM);
    std::_Exit(18);
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

// drain_notice_ms = 0 asks for no notice: a SIGTERM ends the worker as a kill, and nothing wakes.
TEST(drain_notice, with_no_notice_asked_for_a_sigterm_ends_the_worker) {
  int status = in_child([] {
    auto& notice = drain_notice::arm(std::chrono::milliseconds(0), 0, true, [] { std::_Exit(17); });
    ::raise(SIGTERM);
    std::_Exit(notice.given() ? 19 : 18);
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
}

TEST(drain_notice, the_estimate_is_learned_from_the_items_that_finished) {
  int status = in_child([] {
    auto& notice = drain_notice::arm(std::chrono::milliseconds(30000), 0, true, [] {});
    if (notice.learned() != drain_notice::clock::duration::zero()) std::_Exit(15);
    notice.task_begins(std::chrono::milliseconds(0));
    // Two items that take at least a microsecond between them: the clock has moved on.
    auto began = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - began < std::chrono::microseconds(1)) {
    }
    notice.item_done();
    notice.item_done();
    notice.task_ends();
    std::_Exit(notice.learned() > drain_notice::clock::duration::zero() ? 0 : 16);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
