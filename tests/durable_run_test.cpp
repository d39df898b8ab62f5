// Durable runs, end to end with real processes: tests/durable_program (two maps on two workers)
// runs as its own master; its master is SIGKILLed once the journal holds half the second map's
// results (the moment read from the journal itself, woken by inotify), then the program runs
// again with the same run id. Its output equals an uninterrupted run's, the first map runs no task
// again, and of the second map only the items without a journaled result run, each at most once
// more. A run taken up with other inputs fails naming them; a torn tail is taken up to its last
// whole record; a run that ended is answered from its journal without a task.
#include <gtest/gtest.h>

#include "durable_support.hpp"

namespace {
using namespace fiber_test;

TEST(durable_run, a_master_killed_mid_map_is_taken_up_and_runs_only_what_has_no_result) {
  durable_case c("killed");
  c.reattach_grace_ms("1");  // its workers end at once: the master taking the run up starts new ones
  auto pid = c.start("killed");
  ASSERT_GT(pid, 0);
  wait_for_results(c.journal("killed"), 2, 4);  // items 0 to 3 answered
  c.wait_for_both_at_the_gate();
  auto old = c.workers();
  ::kill(pid, SIGKILL);
  auto killed = c.finish(pid);
  EXPECT_EQ(killed.status, -SIGKILL);
  c.wait_for_end(old);  // none of them starts an item once the gate opens
  auto before = c.executions();

  c.open_gate();
  auto again = c.run("killed");
  EXPECT_EQ(again.status, 0) << again.out;
  EXPECT_EQ(again.said(), uninterrupted);
  expect_taken_up(before, c.executions());
}

TEST(durable_run, a_run_that_ended_is_answered_from_its_journal_without_a_task) {
  durable_case c("ended");
  c.open_gate();
  auto first = c.run("ended");
  ASSERT_EQ(first.status, 0) << first.out;
  EXPECT_EQ(first.said(), uninterrupted);
  auto once = c.executions();
  auto again = c.run("ended");
  EXPECT_EQ(again.status, 0) << again.out;
  EXPECT_EQ(again.said(), uninterrupted);
  EXPECT_EQ(c.executions(), once) << "a task ran in a run whose every result was journaled";
}

TEST(durable_run, other_inputs_for_a_journaled_map_fail_naming_the_items_and_the_fix) {
  durable_case c("changed");
  c.open_gate();
  ASSERT_EQ(c.run("changed").status, 0);
  auto changed = c.run("changed", "1");
  EXPECT_EQ(changed.status, 3) << changed.out;
  EXPECT_NE(changed.said().find("other inputs for items 0 to 0 of map 1 of pool 1"), std::string::npos) << changed.out;
  EXPECT_NE(changed.said().find("another run_id"), std::string::npos) << changed.out;
}

TEST(durable_run, a_journal_with_a_torn_tail_is_taken_up_to_its_last_whole_record) {
  durable_case c("torn");
  c.reattach_grace_ms("1");
  auto pid = c.start("torn");
  ASSERT_GT(pid, 0);
  wait_for_results(c.journal("torn"), 2, 4);
  c.wait_for_both_at_the_gate();
  auto old = c.workers();
  ::kill(pid, SIGKILL);
  (void)c.finish(pid);
  c.wait_for_end(old);
  auto whole = fiber::detail::read_journal(c.journal("torn"));
  {
    // What a master killed in the middle of a write leaves: a record's first bytes.
    std::ofstream tail(c.journal("torn"), std::ios::binary | std::ios::app);
    tail << std::string("\x40\x00\x00\x00\x12\x34", 6);
  }
  ASSERT_TRUE(fiber::detail::read_journal(c.journal("torn")).torn);
  auto before = c.executions();
  c.open_gate();
  auto again = c.run("torn");
  EXPECT_EQ(again.status, 0) << again.out;
  EXPECT_EQ(again.said(), uninterrupted);
  expect_taken_up(before, c.executions());
  auto read = fiber::detail::read_journal(c.journal("torn"));
  EXPECT_FALSE(read.torn);
  EXPECT_GT(read.records.size(), whole.records.size());
}

TEST(durable_run_command, fiber_run_restarts_a_master_killed_by_a_signal_with_the_same_run_id) {
  durable_case c("restarted");
  auto runner = c.start("", "0", {FIBER_TEST_CLI, "run", "--backend", "local", "--durable", "--restarts", "1"});
  ASSERT_GT(runner, 0);
  std::string first;
  while (!(first = c.line()).empty() && first.rfind("master ", 0) != 0) {
  }
  ASSERT_EQ(first.rfind("master ", 0), 0u) << "the master never started";
  wait_for_results(c.journals(), 2, 4);
  c.wait_for_both_at_the_gate();
  auto old = c.workers();
  ::kill(std::stoi(first.substr(7)), SIGKILL);
  c.wait_for_end(durable_case::masters(old));  // its workers wait for the master started again
  c.open_gate();
  auto ended = c.finish(runner);
  EXPECT_EQ(ended.status, 0) << ended.out;
  auto lines = ended.out;
  EXPECT_EQ(lines.substr(lines.rfind('\n', lines.size() - 2) + 1), uninterrupted) << ended.out;
  EXPECT_NE(lines.find("the master died by signal 9"), std::string::npos) << ended.out;
  EXPECT_NE(lines.find("master "), std::string::npos) << "the master was not started again: " << ended.out;
  std::size_t journals = 0;
  for (auto& e : fs::directory_iterator(c.journals())) journals += e.path().extension() == ".journal";
  EXPECT_EQ(journals, 1u) << "the master started again under another run id";
  expect_nothing_twice(c.executions());  // the master started again took its workers up
  c.wait_for_end(old);
}

// A durable run's workers on the master's host outlive it for reattach_grace_ms: the master that
// takes the run up links them again, and what they ran and hold is not run again.
TEST(durable_reattach, workers_whose_master_died_are_taken_up_by_the_next_master_and_run_nothing_twice) {
  durable_case c("reattached");
  auto old = c.kill_at_the_gate("reattached");
  auto again = c.start("reattached");
  // Both taken up (the new master journals them again) while their items still wait at the gate.
  wait_for_workers_journaled(c.journal("reattached"), 4);
  c.open_gate();
  auto out = c.finish(again);
  EXPECT_EQ(out.status, 0) << out.out;
  EXPECT_EQ(out.said(), uninterrupted);
  expect_nothing_twice(c.executions());
  c.wait_for_end(old);  // the workers taken up ended with the run: no orphan is left
}

TEST(durable_reattach, results_made_while_no_master_ran_are_taken_by_the_next_master) {
  durable_case c("held");
  auto old = c.kill_at_the_gate("held");
  // The items finish with no master to take their results: the workers hold them.
  c.open_gate();
  c.wait_for_passed(2);
  auto out = c.run("held");
  EXPECT_EQ(out.status, 0) << out.out;
  EXPECT_EQ(out.said(), uninterrupted);
  expect_nothing_twice(c.executions());
  c.wait_for_end(old);
}

// Results that reached the master but not its journal's file (appended in its last
// journal_sync_ms, with the records of their chunks) are taken from the workers that made them:
// a worker holds its results until its master says the journal on disk has them, and says which
// chunk each was.
TEST(durable_reattach, results_the_journal_never_wrote_are_taken_from_the_workers_that_hold_them) {
  durable_case c("unwritten");
  c.journal_sync_ms("3600000");  // no sync while the test runs: only records over 64 kB reach the file
  c.large_first(true);           // the first map's are, and the workers' records before them
  auto pid = c.start("unwritten");
  ASSERT_GT(pid, 0);
  auto journal = c.journal("unwritten");
  // Each worker makes a large result, so that the record of where to find it, which it sent
  // before, reaches the file too: the first map's items wait until both run one.
  wait_in(c.executions_file().parent_path() / "alive", [&] {
    auto alive = c.workers();
    return alive.size() - durable_case::masters(alive).size() >= 2;
  });
  std::ofstream(c.gate().string() + ".first") << "open";
  wait_for_results(journal, 1, 8);
  // The journal's file holds the first map's last result: its writer wrote what it had, and is
  // not woken again before the master dies. Only then does the second map begin.
  std::ofstream(c.gate().string() + ".between") << "open";
  c.wait_for_both_at_the_gate();  // the second map's items 0 to 3 answered, to the master alone
  wait_for_workers_journaled(journal, 2);
  EXPECT_EQ(results_of(journal, 2), 0u) << "the second map's results reached the journal's file";
  auto old = c.workers();
  ::kill(pid, SIGKILL);
  EXPECT_EQ(c.reap(pid), -SIGKILL);
  c.wait_for_end(durable_case::masters(old));

  c.journal_sync_ms("");
  auto again = c.start("unwritten");
  wait_for_workers_journaled(journal, 4);  // both taken up, their items still at the gate
  c.open_gate();
  auto out = c.finish(again);
  EXPECT_EQ(out.status, 0) << out.out;
  EXPECT_EQ(out.said(), uninterrupted);
  expect_nothing_twice(c.executions());
  c.wait_for_end(old);
}

TEST(durable_reattach, a_smaller_pool_takes_up_as_many_workers_as_it_has_and_the_others_leave_at_once) {
  durable_case c("smaller");
  auto old = c.kill_at_the_gate("smaller");
  c.processes("1");
  auto again = c.start("smaller");
  wait_for_workers_journaled(c.journal("smaller"), 3);  // one taken up, journaled again
  c.open_gate();
  auto out = c.finish(again);
  EXPECT_EQ(out.status, 0) << out.out;
  EXPECT_EQ(out.said(), uninterrupted);
  auto ran = c.executions();
  int again_ran = 0;
  for (int i = 4; i < 8; ++i) again_ran += ran["second " + std::to_string(i)] - 1;
  EXPECT_LE(again_ran, 1) << "only the item of the worker told to leave runs again";
  EXPECT_EQ(workers_journaled(c.journal("smaller")), 3u) << "a second worker was taken up past the pool's size";
  c.wait_for_end(old);  // the one told to leave did not wait out its grace
}

TEST(durable_reattach, workers_whose_grace_passed_are_gone_and_the_next_master_starts_new_ones) {
  durable_case c("grace");
  c.reattach_grace_ms("1");
  auto old = c.kill_at_the_gate("grace");
  c.wait_for_end(old);  // the workers too: their grace passed with no master
  auto before = c.executions();
  c.open_gate();
  auto out = c.run("grace");
  EXPECT_EQ(out.status, 0) << out.out;
  EXPECT_EQ(out.said(), uninterrupted);
  expect_taken_up(before, c.executions());
  // The two it could not find are not journaled again; those it started are (each that ran: on an
  // engine the map may end before the second has started).
  auto journaled = worker_points(c.journal("grace"));
  ASSERT_GE(journaled.size(), 3u);
  for (std::size_t i = 0; i < 2; ++i)
    EXPECT_EQ(std::count(journaled.begin(), journaled.end(), journaled[i]), 1) << "a worker it could not find, journaled again";
}

TEST(durable_run_command, restarts_without_durable_are_refused_naming_the_flag) {
  durable_case c("refused");
  auto runner = c.start("", "0", {FIBER_TEST_CLI, "run", "--backend", "local", "--restarts", "1"});
  ASSERT_GT(runner, 0);
  auto ended = c.finish(runner);
  EXPECT_NE(ended.status, 0);
  EXPECT_NE(ended.out.find("--restarts starts a master again to take its run up from the journal: add --durable"),
            std::string::npos) << ended.out;
  EXPECT_TRUE(c.executions().empty()) << "the program ran";
}

}  // namespace
