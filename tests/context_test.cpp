// fiber::context (fiber/context.hpp): its own loop or the caller's, its config, its identity,
// and what stop() leaves behind.
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include <malloc.h>

#include <cstring>
#include <memory>
#include <numeric>

#include "co_test.hpp"
#include "support.hpp"

namespace {
void do_nothing() {}
// Blocks until something arrives on `gate`: a child that is "busy" without sleeping.
void wait_on(fiber::simple_queue<int> gate) { (void)gate.get().get(); }
void report_job(fiber::simple_queue<std::string> out) { out.put(fiber::context::default_context().job_id()).get(); }
/// Allocates 64 MiB in 1 MiB blocks, frees them, and says how much freed memory malloc kept.
std::size_t freed_memory_kept() {
  std::vector<std::unique_ptr<char[]>> blocks;
  for (int i = 0; i < 64; ++i) {
    blocks.emplace_back(new char[1 << 20]);
    std::memset(blocks.back().get(), i, 1 << 20);  // touched, as a received message is
  }
  blocks.clear();
  return mallinfo2().fordblks;
}
void report_freed_memory_kept(fiber::simple_queue<std::size_t> out) { out.put(freed_memory_kept()).get(); }
int triple(int x) { return 3 * x; }
// What getting_started shows for a plain program that wants co_await: a coroutine on the default
// context's executor, every wait in it a co_await.
asio::awaitable<int> sum_of_triples(fiber::pool& pool, std::vector<int> xs) {
  auto ys = co_await pool.map(&triple, xs);
  co_return std::accumulate(ys.begin(), ys.end(), 0);
}
asio::awaitable<void> throw_from_a_detached_coroutine() {
  throw std::runtime_error("thrown by a detached coroutine");
  co_return;
}
}  // namespace
FIBER_REMOTE(do_nothing);
FIBER_REMOTE(triple);
FIBER_REMOTE(wait_on);
FIBER_REMOTE(report_job);
FIBER_REMOTE(report_freed_memory_kept);

TEST(context, keeps_the_config_it_was_given) {
  fiber::context ctx(fiber::config::load({{"heartbeat_interval_ms", "1234"}}));
  EXPECT_EQ(ctx.config().heartbeat_interval_ms, 1234);
}

TEST(context, listens_only_once_a_child_needs_it_and_children_share_its_job) {
  fiber::context ctx;
  EXPECT_TRUE(ctx.endpoints().empty());
  EXPECT_FALSE(ctx.job_id().empty());
  fiber::simple_queue<std::string> out(ctx);
  fiber::process p(ctx, &report_job, out);
  p.start().get();
  EXPECT_FALSE(ctx.endpoints().empty());
  EXPECT_EQ(out.get().get(), ctx.job_id());
  p.join().get();
}

TEST(context, its_processes_keep_freed_memory_for_the_next_large_message) {
  if (const char* t = std::getenv("GLIBC_TUNABLES"); t && std::strstr(t, "glibc.malloc."))
    GTEST_SKIP() << "GLIBC_TUNABLES sets malloc keys: fiber leaves malloc to them";
  // Without malloc_keep_mb, glibc hands 1 MiB blocks back to the kernel as they are freed (each
  // hand-back a TLB flush on every core, each reuse page faults): a few MiB at most stay.
  fiber::context ctx(fiber::config::load({{"malloc_keep_mb", "256"}}));
  EXPECT_GE(freed_memory_kept(), std::size_t{32} << 20) << "in the master";
  fiber::simple_queue<std::size_t> out(ctx);
  fiber::process p(ctx, &report_freed_memory_kept, out);
  p.start().get();
  EXPECT_GE(out.get().get(), std::size_t{32} << 20) << "in a child";
  p.join().get();
}

TEST(context, two_contexts_are_two_jobs) {
  fiber::context a, b;
  EXPECT_NE(a.job_id(), b.job_id());
}

TEST(context, on_the_callers_io_context_its_executor_is_that_io_context) {
  asio::io_context io;
  fiber::context ctx(io);
  EXPECT_TRUE(ctx.get_executor() == asio::any_io_executor(io.get_executor()));
}

FIBER_CO_TEST(context, a_stopped_context_lets_the_callers_io_context_run_out) {
  // run_coroutine's io.run() returns only when fiber left no work behind after ctx.stop().
  fiber::simple_queue<int> q(ctx);
  co_await q.put(1);
  EXPECT_EQ(co_await q.get(), 1);
}

// A plain program co_awaits on the default context: its executor runs the coroutine, and the
// future hands main the result.
TEST(context, a_coroutine_runs_on_the_default_contexts_executor_and_co_awaits_a_pool) {
  fiber::pool pool(2);
  auto ex = fiber::context::default_context().get_executor();
  auto sum = asio::co_spawn(ex, sum_of_triples(pool, {1, 2, 3, 4}), asio::use_future);
  EXPECT_EQ(sum.get(), 30);
}

TEST(context, exception_escaping_a_detached_coroutine_does_not_break_other_calls) {
  fiber::context ctx;
  fiber::simple_queue<int> q(ctx);
  asio::co_spawn(ctx.get_executor(), throw_from_a_detached_coroutine(), asio::detached);
  q.put(7).get();  // whoever runs the loop meets the exception: it is logged, not passed on
  EXPECT_EQ(q.get().get(), 7);
  fiber::process p(ctx, &do_nothing);
  p.start().get();
  p.join().get();
  EXPECT_EQ(p.exitcode(), 0);
}

TEST(context, stopping_a_context_ends_pools_and_managers_quietly_and_warns_of_a_users_own_process) {
  // Stopping on purpose is no failure: a pool's workers and a manager's server end with their
  // context as the default context's do at exit. A process of the user's own still running then
  // is worth a word.
  fiber::context ctx;
  fiber::simple_queue<int> gate(ctx);
  fiber::pool p(ctx, {.processes = 2});
  p.ready().get();
  fiber::manager m(ctx);
  m.ready().get();
  fiber::process own(ctx, &wait_on, gate);
  own.start().get();
  testing::internal::CaptureStderr();
  ctx.stop();
  auto said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(said.find("PoolWorker"), std::string::npos) << said;
  EXPECT_EQ(said.find("Manager-"), std::string::npos) << said;
  EXPECT_NE(said.find("process " + own.name() + " still running when its context stopped"), std::string::npos) << said;
  EXPECT_FALSE(own.is_alive());
}

TEST(context, stopping_a_context_leaves_no_process_behind) {
  FIBER_TEST_LOCAL_ONLY("counts the fork server among this process's children");
  auto before = fiber_test::child_pids(true);  // other contexts' fork servers, if any
  {
    fiber::context ctx;  // start_method=forkserver by default: a fork server runs too
    fiber::simple_queue<int> gate(ctx);
    fiber::process p(ctx, &wait_on, gate);
    p.start().get();
    EXPECT_GE(fiber_test::child_pids(true).size(), before.size() + 2);  // the child and the fork server
    ctx.stop();
    EXPECT_FALSE(p.is_alive());
    fiber_test::expect_error([&] { fiber::process(ctx, &do_nothing).start().get(); }, fiber::errc::closed);
  }
  EXPECT_EQ(fiber_test::child_pids(true), before);
}
