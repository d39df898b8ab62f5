// A nested master's child as the top master's news tell of it, without a process: every caller
// that waits for it to run, or for its pid, is told (one waiter per event used to be kept, and a
// second caller replaced the first), its end reaches whoever waits for it, and what this process
// asks of it goes up, until it has ended.
#include "runtime/nested/relayed_run.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <tuple>
#include <vector>

namespace {
using fiber::detail::kind;
using fiber::detail::relayed_run;
namespace spawn_wire = fiber::detail::spawn_wire;

struct sent_up {
  std::vector<std::tuple<kind, std::uint64_t, std::uint32_t>> asks;
  relayed_run::send_fn fn() {
    return [this](kind k, std::uint64_t r, std::uint32_t a) { asks.emplace_back(k, r, a); };
  }
};
}  // namespace

TEST(relayed_run, every_caller_waiting_to_run_or_for_its_pid_is_told) {
  sent_up up;
  relayed_run run(up.fn());
  int running = 0, identified = 0;
  run.when_running([&] { ++running; });
  run.when_running([&] { ++running; });
  run.when_identified([&] { ++identified; });
  run.when_identified([&] { ++identified; });
  run.identified(4242);
  EXPECT_EQ(identified, 2);
  EXPECT_EQ(run.pid.load(), 4242);
  run.running();
  EXPECT_EQ(running, 2);
  run.when_running([&] { ++running; });  // after it runs: at once
  EXPECT_EQ(running, 3);
}

TEST(relayed_run, its_end_reaches_whoever_waits_with_the_tops_words) {
  sent_up up;
  relayed_run run(up.fn());
  int code = 0;
  run.on_exit([&](int c) { code = c; });
  spawn_wire::child_news news;
  news.pid = 7;
  news.code = -9;
  news.detail = "the node went away";
  news.never_fits = true;
  run.exited(news);
  EXPECT_EQ(code, -9);
  EXPECT_EQ(run.exit_detail(), "the node went away");
  EXPECT_TRUE(run.never_fits());
  EXPECT_TRUE(run.finished());
}

TEST(relayed_run, what_is_asked_of_it_goes_up_until_it_has_ended) {
  sent_up up;
  relayed_run run(up.fn());
  run.request = 5;
  run.signal(SIGTERM);
  run.reported_pid(99);
  run.expect_exit();
  ASSERT_EQ(up.asks.size(), 3u);
  EXPECT_EQ(up.asks[0], std::make_tuple(spawn_wire::signal, std::uint64_t{5}, std::uint32_t{SIGTERM}));
  EXPECT_EQ(std::get<0>(up.asks[1]), spawn_wire::reported_pid);
  EXPECT_EQ(run.pid.load(), 99) << "the child's own word, where the top said none";
  EXPECT_EQ(std::get<0>(up.asks[2]), spawn_wire::expect_exit);
  run.exited({});
  run.kill_and_reap();
  EXPECT_EQ(up.asks.size(), 3u) << "nothing asked of a child that ended";
}

// A child the top master's engine stopped for memory is known as such down the tree: the news
// carries the limit and the peak across the wire, and the relayed run reports them.
TEST(relayed_run, a_memory_stop_crosses_the_wire_with_its_limit_and_peak) {
  spawn_wire::child_news news;
  news.code = -9;
  news.detail = "stopped";
  news.memory = fiber::detail::memory_stop{256, 301};
  auto told = spawn_wire::decode_news(spawn_wire::encode(news));
  ASSERT_TRUE(told.memory);
  EXPECT_EQ(told.memory->limit_mb, 256u);
  EXPECT_EQ(told.memory->peak_mb, 301u);
  EXPECT_FALSE(spawn_wire::decode_news(spawn_wire::encode(spawn_wire::child_news{})).memory) << "none when none";

  sent_up up;
  relayed_run run(up.fn());
  run.exited(told);
  ASSERT_TRUE(run.memory_stopped());
  EXPECT_EQ(run.memory_stopped()->limit_mb, 256u);
}
