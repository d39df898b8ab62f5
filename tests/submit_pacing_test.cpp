// When a master's sbatch submissions go (backend/slurm/submit_pacing): how many jobs a scheduling
// pass reaches, read from scontrol's configuration; a submission held until a pass has looked at
// those before it, unless they fit in one pass together or the hold has lasted too long.
#include "backend/slurm/submit_pacing.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

using namespace fiber::detail::slurm;
using namespace std::chrono_literals;

namespace {

/// A submission of `jobs` jobs, `unseen` of them not looked at by a pass yet.
struct fake_submission {
  std::size_t jobs = 0, unseen = 0;
  std::size_t size() const { return jobs; }
};
using pacing = submit_pacing<fake_submission>;
std::size_t unseen_of(const fake_submission& s) { return s.unseen; }

std::shared_ptr<fake_submission> of(std::size_t jobs) {
  return std::make_shared<fake_submission>(fake_submission{jobs, jobs});
}

constexpr char config_head[] =
    "Configuration data as of 2026-12-01T10:00:00\n"
    "AccountingStorageBackupHost = (null)\n"
    "SchedulerTimeSlice      = 30 sec\n"
    "SchedulerType           = sched/backfill\n";

}  // namespace

TEST(pass_depth, is_slurms_default_when_the_cluster_sets_none) {
  EXPECT_EQ(pass_depth_in(std::string(config_head) + "SchedulerParameters     = (null)\n"), default_pass_depth);
  EXPECT_EQ(pass_depth_in(config_head), default_pass_depth);
  EXPECT_EQ(pass_depth_in(""), default_pass_depth);
  EXPECT_EQ(default_pass_depth, 100u);
}

TEST(pass_depth, is_the_clusters_default_queue_depth) {
  EXPECT_EQ(pass_depth_in(std::string(config_head) + "SchedulerParameters     = bf_continue,default_queue_depth=250,bf_window=60\n"),
            250u);
  EXPECT_EQ(pass_depth_in("SchedulerParameters = default_queue_depth=7"), 7u) << "the last line, without a newline";
}

TEST(pass_depth, is_lowered_by_a_start_limit_or_a_partitions_depth) {
  EXPECT_EQ(pass_depth_in("SchedulerParameters = default_queue_depth=250,sched_max_job_start=40\n"), 40u);
  EXPECT_EQ(pass_depth_in("SchedulerParameters = partition_job_depth=30\n"), 30u);
  EXPECT_EQ(pass_depth_in("SchedulerParameters = sched_max_job_start=0,partition_job_depth=0\n"), default_pass_depth)
      << "0 is no limit";
}

TEST(pass_depth, ignores_what_is_not_a_number_or_another_key) {
  EXPECT_EQ(pass_depth_in("SchedulerParameters = default_queue_depth=lots,max_default_queue_depth=5\n"),
            default_pass_depth);
  EXPECT_EQ(pass_depth_in("SchedulerParameters = default_queue_depth=0\n"), 1u) << "a pass reaches one job at least";
}

TEST(submit_pacing, submissions_that_fit_in_one_pass_go_at_once) {
  pacing p(100);
  auto t = pacing::clock::now();
  EXPECT_EQ(p.offer(of(60), unseen_of, t).size(), 1u);
  EXPECT_EQ(p.offer(of(40), unseen_of, t).size(), 1u) << "60 + 40 jobs fit in a pass of 100";
  EXPECT_FALSE(p.holding());
}

TEST(submit_pacing, one_that_would_share_a_pass_beyond_its_depth_waits_until_a_pass_looked_at_those_before) {
  pacing p(100);
  auto t = pacing::clock::now();
  auto first = of(100);
  ASSERT_EQ(p.offer(first, unseen_of, t).size(), 1u);
  EXPECT_TRUE(p.offer(of(28), unseen_of, t).empty());
  EXPECT_TRUE(p.release(unseen_of, t + 1s).empty()) << "no pass has looked at the first yet";
  first->unseen = 80;  // a pass reached 20 of them (the others ahead of them took the rest)
  EXPECT_TRUE(p.release(unseen_of, t + 2s).empty()) << "80 + 28 jobs are more than a pass";
  first->unseen = 1;
  auto go = p.release(unseen_of, t + 3s);
  ASSERT_EQ(go.size(), 1u);
  EXPECT_EQ(go.front()->size(), 28u) << "the pass its submission triggers reaches all 1 + 28";
  EXPECT_FALSE(p.holding());
}

TEST(submit_pacing, held_submissions_go_in_order_each_behind_the_one_before) {
  pacing p(10);
  auto t = pacing::clock::now();
  auto a = of(10), b = of(10), c = of(5);
  EXPECT_EQ(p.offer(a, unseen_of, t).size(), 1u);
  EXPECT_TRUE(p.offer(b, unseen_of, t).empty());
  EXPECT_TRUE(p.offer(c, unseen_of, t).empty()) << "5 would fit beside nothing but goes after b";
  a->unseen = 0;
  auto go = p.release(unseen_of, t + 1s);
  ASSERT_EQ(go.size(), 1u);
  EXPECT_EQ(go.front(), b) << "b and c together are more than a pass";
  b->unseen = 0;
  go = p.release(unseen_of, t + 2s);
  ASSERT_EQ(go.size(), 1u);
  EXPECT_EQ(go.front(), c);
}

TEST(submit_pacing, a_hold_ends_after_five_seconds_even_if_no_pass_looked) {
  // A busy controller's event passes may never reach the jobs sent before: they then wait for its
  // full pass, and so would the held ones.
  pacing p(100);
  auto t = pacing::clock::now();
  ASSERT_EQ(p.offer(of(100), unseen_of, t).size(), 1u);
  EXPECT_TRUE(p.offer(of(100), unseen_of, t).empty());
  EXPECT_TRUE(p.release(unseen_of, t + longest_hold - 1ms).empty());
  EXPECT_EQ(p.release(unseen_of, t + longest_hold).size(), 1u);
  EXPECT_EQ(longest_hold, 5s);
}

TEST(submit_pacing, a_submission_refused_or_killed_holds_nothing_back) {
  pacing p(10);
  auto t = pacing::clock::now();
  auto a = of(10);
  ASSERT_EQ(p.offer(a, unseen_of, t).size(), 1u);
  EXPECT_TRUE(p.offer(of(10), unseen_of, t).empty());
  a->unseen = 0;  // its jobs ended without a pass
  EXPECT_EQ(p.release(unseen_of, t).size(), 1u);
}

TEST(submit_pacing, keeps_what_it_sent_until_a_pass_has_looked_at_it) {
  // The submitter lets go of a submission once sbatch answers; the jobs it holds still count.
  pacing p(10);
  auto t = pacing::clock::now();
  std::weak_ptr<fake_submission> sent;
  {
    auto a = of(10);
    sent = a;
    ASSERT_EQ(p.offer(a, unseen_of, t).size(), 1u);
  }
  EXPECT_TRUE(p.offer(of(10), unseen_of, t).empty());
  ASSERT_FALSE(sent.expired());
  sent.lock()->unseen = 0;
  EXPECT_EQ(p.release(unseen_of, t).size(), 1u);
  EXPECT_TRUE(sent.expired()) << "let go of once seen";
}
