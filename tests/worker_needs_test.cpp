// What a pool's new workers start with, on its own: the config's defaults fill in what a need
// leaves at 0, a raise is pending until a worker with it connects or it is refused, and a
// refusal goes back to what the running workers have.
#include "primitives/pool/worker_needs.hpp"

#include <gtest/gtest.h>

namespace {
using fiber::meta;
using fiber::detail::worker_needs;

fiber::config defaults(int cpu, int memory_mb) {
  return fiber::config::load({{"cpu_per_job", std::to_string(cpu)}, {"mem_per_job", std::to_string(memory_mb)}});
}

TEST(worker_needs, a_need_left_at_zero_is_the_configs_default) {
  auto cfg = defaults(2, 0);
  worker_needs needs({}, cfg);
  EXPECT_EQ(needs.full_now().cpu, 2);
  EXPECT_EQ(needs.full_now().memory_mb, 0) << "no limit";
  EXPECT_TRUE(needs.covers(meta{.cpu = 2}));
  EXPECT_FALSE(needs.covers(meta{.cpu = 3}));
  EXPECT_FALSE(needs.covers(meta{.gpu = 1}));
}

TEST(worker_needs, a_worker_without_a_memory_limit_covers_no_function_that_declares_one) {
  auto cfg = defaults(1, 0);
  worker_needs needs({}, cfg);
  EXPECT_FALSE(needs.covers(meta{.memory_mb = 256})) << "the declared limit would bind nothing";
  needs.raise(meta{.memory_mb = 256});
  EXPECT_EQ(needs.full_now().memory_mb, 256) << "new workers start with the limit";
  EXPECT_TRUE(needs.covers(meta{.memory_mb = 256}));
}

TEST(worker_needs, a_limited_memory_default_does_not_cover_more) {
  auto cfg = defaults(1, 512);
  worker_needs needs({}, cfg);
  EXPECT_TRUE(needs.covers(meta{.memory_mb = 512}));
  EXPECT_FALSE(needs.covers(meta{.memory_mb = 513}));
}

TEST(worker_needs, a_raise_is_pending_until_a_worker_started_with_it_connects) {
  auto cfg = defaults(1, 0);
  worker_needs needs(meta{.cpu = 1}, cfg);
  EXPECT_FALSE(needs.pending());
  needs.raise(meta{.gpu = 1});
  EXPECT_TRUE(needs.pending());
  EXPECT_EQ(needs.now().gpu, 1);
  EXPECT_EQ(needs.now().cpu, 1) << "a raise joins the needs, it does not replace them";
  EXPECT_TRUE(needs.covers(meta{.gpu = 1}));
  EXPECT_FALSE(needs.met_by(needs.full(meta{.cpu = 1}))) << "a worker started before the raise";
  EXPECT_TRUE(needs.pending());
  EXPECT_TRUE(needs.met_by(needs.full(meta{.cpu = 1, .gpu = 1})));
  EXPECT_FALSE(needs.pending());
}

TEST(worker_needs, a_refused_raise_goes_back_to_what_the_running_workers_have) {
  auto cfg = defaults(1, 0);
  worker_needs needs(meta{.cpu = 1}, cfg);
  needs.raise(meta{.gpu = 2});
  auto refused = needs.refuse();
  EXPECT_EQ(refused.gpu, 2);
  EXPECT_EQ(refused.memory_mb, 0) << "filled in, as workers' needs are kept: no limit";
  EXPECT_FALSE(needs.pending());
  EXPECT_EQ(needs.now().gpu, 0);
  EXPECT_FALSE(needs.covers(meta{.gpu = 1}));
}

}  // namespace
