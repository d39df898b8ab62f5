// What a pool's workers' memory limits may add up to, on its own: memory_budget_mb when set, the
// host's available memory less a reserve for the local backend, no budget for the engines (which
// weigh each worker against their nodes); over it, a refusal that names the sums and the fixes.
#include "primitives/pool/memory_budget.hpp"

#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include "core/process_memory.hpp"
#include "support.hpp"

namespace {
using namespace fiber::detail;

TEST(memory_budget, the_configs_budget_holds_on_every_backend) {
  for (auto backend : {"local", "docker", "kubernetes", "slurm"}) {
    auto b = memory_budget_for(fiber::config::load({{"memory_budget_mb", "1000"}, {"backend", backend}}));
    EXPECT_EQ(b.mb, 1000u) << backend;
    EXPECT_EQ(b.whence, "memory_budget_mb");
  }
}

TEST(memory_budget, left_at_zero_the_local_backends_is_the_hosts_available_memory_less_a_tenth_and_engines_have_none) {
  auto host = this_host_memory();
  ASSERT_GT(host.total, 0u) << "/proc/meminfo says nothing";
  auto local = memory_budget_for(fiber::config::load({{"backend", "local"}}));
  EXPECT_GT(local.mb, 0u);
  EXPECT_LT(local.mb, host.total >> 20) << "a reserve is kept";
  EXPECT_NE(local.whence.find("available memory"), std::string::npos) << local.whence;
  EXPECT_EQ(memory_budget_for(fiber::config::load({{"backend", "docker"}})).mb, 0u);
  EXPECT_EQ(memory_budget_for(fiber::config::load({{"backend", "slurm"}})).mb, 0u);
}

TEST(memory_budget, workers_over_the_budget_are_refused_with_the_sums_and_the_fixes) {
  memory_budget budget{1000, "memory_budget_mb"};
  EXPECT_NO_THROW(check_memory_budget(4, 250, budget)) << "exactly the budget";
  EXPECT_NO_THROW(check_memory_budget(100, 0, budget)) << "workers without a limit count nothing";
  EXPECT_NO_THROW(check_memory_budget(100, 512, {})) << "no budget";
  fiber_test::expect_error([&] { check_memory_budget(8, 256, budget); }, fiber::errc::unsatisfiable,
                           "8 workers with a memory limit of 256 MiB each add up to 2048 MiB, more than the memory "
                           "budget of 1000 MiB (memory_budget_mb); use fewer processes, a lower memory_mb, or set "
                           "memory_budget_mb");
}

TEST(memory_budget, a_pool_over_the_budget_is_refused_when_it_is_made) {
  fiber::context ctx(fiber::config::load({{"memory_budget_mb", "512"}}));
  fiber_test::expect_error([&] { fiber::pool pool(ctx, {.processes = 4, .needs = {.memory_mb = 256}}); },
                           fiber::errc::unsatisfiable, "add up to 1024 MiB, more than the memory budget of 512 MiB");
}

}  // namespace
