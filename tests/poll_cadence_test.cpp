// How often a master's batch jobs are asked about (backend/slurm/poll_cadence): soon after a
// change, backing off while a job waits or its worker has not linked, every ten minutes as soon as
// every job runs with its worker linked (the link tells of an end first), and never later than a
// look asked for, even one asked while a squeue was in flight; and what counts as quiet.
#include "backend/slurm/poll_cadence.hpp"

#include <asio/io_context.hpp>
#include <gtest/gtest.h>

#include <csignal>
#include <memory>
#include <vector>

#include "backend/slurm/batch_watch.hpp"

using namespace fiber::detail::slurm;
using namespace std::chrono_literals;

TEST(poll_cadence, a_change_asks_again_soon) {
  poll_cadence c;
  EXPECT_EQ(c.answered(true, false), first_poll);
  (void)c.answered(false, true);
  EXPECT_EQ(c.answered(true, true), first_poll);
}

TEST(poll_cadence, while_a_job_waits_or_its_worker_has_not_linked_the_wait_doubles_up_to_five_seconds) {
  poll_cadence c;
  std::vector<std::chrono::milliseconds> waits;
  for (int i = 0; i < 10; ++i) waits.push_back(c.answered(false, false));
  EXPECT_EQ(waits.front(), 2 * first_poll);
  EXPECT_EQ(waits.back(), longest_poll);
  EXPECT_EQ(longest_poll, 5s);
}

TEST(poll_cadence, once_every_job_runs_linked_the_next_look_is_ten_minutes_away_at_once) {
  poll_cadence c;
  EXPECT_EQ(c.answered(false, true), quiet_poll);
  EXPECT_EQ(quiet_poll, 10min);
  EXPECT_EQ(c.answered(false, false), longest_poll) << "a job that is not quiet any more brings back the back-off";
}

// A worker's link drops while a squeue is in flight: its answer, asked before the job ended, still
// shows every job running and linked. The look the drop asked for must still come soon, not ten
// minutes later.
TEST(poll_cadence, a_look_asked_for_while_a_squeue_is_in_flight_is_not_put_off_by_its_answer) {
  poll_cadence c;
  (void)c.answered(false, true);
  c.ask(soon_poll, true);
  EXPECT_EQ(c.answered(false, true), soon_poll);
  EXPECT_EQ(c.answered(false, true), quiet_poll) << "the ask holds for one answer only";
}

TEST(poll_cadence, a_look_asked_for_between_squeues_shortens_the_back_off) {
  poll_cadence c;
  (void)c.answered(false, true);
  c.ask(first_poll, false);  // a job submitted: the timer is armed at first_poll, and the wait starts over
  EXPECT_EQ(c.wait(), first_poll);
  EXPECT_EQ(c.answered(false, false), 2 * first_poll);
}

TEST(poll_cadence, a_failed_squeue_is_tried_again_backing_off_up_to_five_seconds) {
  poll_cadence c;
  (void)c.answered(false, true);
  EXPECT_EQ(c.failed(), longest_poll);
  c.ask(first_poll, true);
  EXPECT_EQ(c.failed(), first_poll) << "a look asked for during the failed squeue still comes soon";
}

// What the cadence is told is quiet: a job that runs with its worker linked, and that was sent no
// signal. A job told to end may end in a state only squeue tells (a worker that ignores SIGTERM
// and is cancelled after its grace keeps its link until Slurm has ended it), so it must keep the
// short back-off, not wait ten minutes.
TEST(poll_cadence, a_running_linked_job_is_quiet_until_it_is_sent_a_signal) {
  asio::io_context io;
  auto watch = std::make_shared<batch_watch>(io, fiber::config{}, "master", "");
  auto run = std::make_shared<batch_run>(watch, "Process-1");  // no id: signal() sends no scancel
  run->at = batch_run::stage::running;
  EXPECT_FALSE(run->quiet()) << "its worker has not linked";
  run->reported_pid(4242);
  EXPECT_TRUE(run->quiet());
  run->signal(SIGTERM);
  EXPECT_FALSE(run->quiet());
}

// A ZeroMQ router tells nothing of a link's end: a worker killed without a word is found by
// squeue alone, which must keep its short back-off.
TEST(poll_cadence, over_zeromq_links_no_job_is_quiet) {
  asio::io_context io;
  fiber::config cfg;
  cfg.remote_transport = "zeromq";
  auto watch = std::make_shared<batch_watch>(io, cfg, "master", "");
  auto run = std::make_shared<batch_run>(watch, "Process-1");
  run->at = batch_run::stage::running;
  run->reported_pid(4242);
  EXPECT_FALSE(run->quiet());
}

// A job whose worker said it ends (or whose link dropped) may show running in squeue a while yet:
// were it quiet, the look after that answer would come ten minutes later, and so would its end.
TEST(poll_cadence, a_job_whose_worker_said_it_ends_is_not_quiet) {
  asio::io_context io;
  auto watch = std::make_shared<batch_watch>(io, fiber::config{}, "master", "");
  auto run = std::make_shared<batch_run>(watch, "Process-1");
  run->at = batch_run::stage::running;
  run->reported_pid(4242);
  ASSERT_TRUE(run->quiet());
  run->expect_exit();
  EXPECT_FALSE(run->quiet());
}
