// What each of a pool's workers holds, on its own, with workers made here: the next chunk goes to
// the worker that covers its needs and holds the fewest tasks, one that must run alone only to an
// idle worker and then nothing more to it, a worker without credit is passed over until its credit
// comes back, and a task's finish gives its credit back and counts its items.
#include "primitives/pool/worker_load.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace {
using namespace fiber::detail;

struct pool_worker_load : ::testing::Test {
  worker_load load;
  std::map<std::string, pool_worker> workers;
  const pool_worker& add(const std::string& rid, int credit, fiber::meta needs = {1, 0, 0}) {
    auto& w = workers[rid];
    w.rid = rid;
    w.connected = true;
    w.needs = needs;
    load.credit(w, credit);
    return w;
  }
};

TEST_F(pool_worker_load, the_next_chunk_goes_to_the_covering_worker_that_holds_the_fewest) {
  auto& a = add("a", 3);
  auto& b = add("b", 3);
  auto& gpu = add("gpu", 3, {1, 0, 1});
  EXPECT_TRUE(load.took(a, 1, false, std::nullopt));
  EXPECT_FALSE(load.took(a, 2, false, std::nullopt));  // not its only one
  EXPECT_TRUE(load.took(b, 3, false, std::nullopt));
  EXPECT_EQ(load.least_loaded({1, 0, 0}), &gpu);  // holds nothing
  EXPECT_TRUE(load.took(gpu, 4, false, std::nullopt));
  EXPECT_EQ(load.least_loaded({1, 0, 0}), &b);     // one, against a's two
  EXPECT_EQ(load.least_loaded({1, 0, 1}), &gpu);   // the only one with a GPU
  EXPECT_EQ(load.least_loaded({1, 0, 2}), nullptr);
}

TEST_F(pool_worker_load, a_chunk_that_runs_alone_goes_to_an_idle_worker_which_then_gets_nothing_else) {
  auto& a = add("a", 3);
  auto& b = add("b", 3);
  (void)load.took(a, 1, false, std::nullopt);
  EXPECT_EQ(load.least_loaded({1, 0, 0}, true), &b);
  (void)load.took(b, 2, true, std::nullopt);
  EXPECT_EQ(load.least_loaded({1, 0, 0}, true), nullptr);  // a holds one, b runs alone
  EXPECT_EQ(load.least_loaded({1, 0, 0}), &a);
  load.finished(b, 2, 1, 1, std::nullopt);
  EXPECT_EQ(load.least_loaded({1, 0, 0}), &b);  // idle again
  EXPECT_EQ(b.items_done, 1u);
}

TEST_F(pool_worker_load, a_worker_out_of_credit_is_passed_over_until_its_credit_comes_back) {
  auto& a = add("a", 1);
  auto& b = add("b", 5);
  (void)load.took(b, 1, false, std::nullopt);
  (void)load.took(b, 2, false, std::nullopt);
  (void)load.took(a, 3, false, std::nullopt);
  EXPECT_EQ(a.credit, 0);
  EXPECT_EQ(load.least_loaded({1, 0, 0}), &b);  // a holds fewer, but has no credit
  load.finished(a, 3, 4, 1, std::nullopt);
  EXPECT_EQ(load.least_loaded({1, 0, 0}), &a);
  EXPECT_EQ(a.items_done, 4u);
  load.no_credit(a);
  EXPECT_EQ(load.least_loaded({1, 0, 0}), &b);
}

TEST_F(pool_worker_load, the_running_item_starts_with_the_first_task_and_each_report_and_tasks_can_be_taken_back) {
  auto& a = add("a", 4);
  auto t0 = std::chrono::steady_clock::time_point(std::chrono::seconds(10));
  auto t1 = t0 + std::chrono::seconds(1);
  EXPECT_TRUE(load.took(a, 1, false, t0));
  (void)load.took(a, 2, false, t1);
  EXPECT_EQ(a.running_since, t0);  // a second task does not restart the clock
  load.reported(a, 3, t1);
  EXPECT_EQ(a.running_since, t1);
  EXPECT_EQ(a.items_done, 3u);
  EXPECT_EQ(load.take_tasks(a), (std::deque<std::uint64_t>{1, 2}));
  EXPECT_TRUE(a.tasks.empty());
}

TEST_F(pool_worker_load, a_worker_forgotten_is_never_chosen_again) {
  auto& a = add("a", 2);
  load.forget(a);
  workers.erase("a");
  EXPECT_EQ(load.least_loaded({1, 0, 0}), nullptr);
}

}  // namespace
