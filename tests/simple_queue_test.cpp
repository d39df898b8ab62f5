// fiber::simple_queue (fiber/simple_queue.hpp) between real processes: blocking and awaited.
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include "co_test.hpp"
#include "support.hpp"

#include <algorithm>
#include <numeric>

namespace {
void write_range(fiber::simple_queue<int> q, int from, int count) {
  for (int i = from; i < from + count; ++i) q.put(i).get();
}
void relay(fiber::simple_queue<std::string> in, fiber::simple_queue<std::string> out, int count) {
  for (int i = 0; i < count; ++i) out.put(in.get().get() + " relayed").get();
}
// Takes one item, reports who took it, then waits for its own release: a reader that is busy.
void take_one(int reader, fiber::simple_queue<int> work, fiber::simple_queue<std::pair<int, int>> taken,
              fiber::simple_queue<int> release) {
  int item = work.get().get();
  taken.put({reader, item}).get();
  (void)release.get().get();
}
void sum_big(fiber::simple_queue<std::vector<double>> in, fiber::simple_queue<double> out) {
  auto v = in.get().get();
  out.put(std::accumulate(v.begin(), v.end(), 0.0)).get();
}
}  // namespace
void size_of_one(fiber::simple_queue<std::string> in, fiber::simple_queue<std::uint64_t> out) {
  auto s = in.get().get();
  out.put(s.size() + static_cast<unsigned char>(s[s.size() / 2])).get();
}
FIBER_REMOTE(write_range);
FIBER_REMOTE(size_of_one);
FIBER_REMOTE(relay);
FIBER_REMOTE(take_one);
FIBER_REMOTE(sum_big);

TEST(simple_queue, in_one_process) {
  fiber::simple_queue<std::string> q;
  q.put("a").get();
  q.put("b").get();
  EXPECT_EQ(q.get().get(), "a");
  EXPECT_EQ(q.get().get(), "b");
}

TEST(simple_queue, get_with_timeout_on_an_empty_queue) {
  fiber::simple_queue<int> q;
  EXPECT_EQ(q.get(std::chrono::milliseconds(1)).get(), std::nullopt);
  q.put(5).get();
  EXPECT_EQ(q.get(std::chrono::milliseconds(1)).get(), 5);
}

TEST(simple_queue, order_from_one_writer) {
  fiber::simple_queue<int> q;
  fiber::process p(&write_range, q, 0, 1000);
  p.start().get();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(q.get().get(), i);
  p.join().get();
  EXPECT_EQ(p.exitcode(), 0);
}

TEST(simple_queue, many_writers) {
  fiber::simple_queue<int> q;
  std::vector<fiber::process> writers;
  for (int w = 0; w < 4; ++w) writers.emplace_back(&write_range, q, w * 100, 100);
  for (auto& p : writers) p.start().get();
  std::vector<int> got;
  for (int i = 0; i < 400; ++i) got.push_back(q.get().get());
  for (auto& p : writers) p.join().get();
  std::sort(got.begin(), got.end());
  std::vector<int> expected(400);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(got, expected);
}

TEST(simple_queue, relay_between_two_children) {
  fiber::simple_queue<std::string> a, b, c;
  fiber::process first(&relay, a, b, 10), second(&relay, b, c, 10);
  first.start().get();
  second.start().get();
  for (int i = 0; i < 10; ++i) a.put("m" + std::to_string(i)).get();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(c.get().get(), "m" + std::to_string(i) + " relayed relayed");
  first.join().get();
  second.join().get();
}

TEST(simple_queue, items_go_to_waiting_readers_not_to_a_busy_one) {
  fiber::simple_queue<int> work, release;
  fiber::simple_queue<std::pair<int, int>> taken;
  std::vector<fiber::process> readers;
  for (int r = 0; r < 4; ++r) readers.emplace_back(&take_one, r, work, taken, release);
  for (auto& p : readers) p.start().get();
  for (int i = 0; i < 4; ++i) work.put(i).get();
  std::vector<int> reader_of(4, -1);
  for (int i = 0; i < 4; ++i) {
    auto [reader, item] = taken.get().get();
    reader_of[item] = reader;
  }
  for (int i = 0; i < 4; ++i) release.put(0).get();
  for (auto& p : readers) p.join().get();
  // Each reader took exactly one: none was handed a second item while busy.
  std::vector<int> readers_seen = reader_of;
  std::sort(readers_seen.begin(), readers_seen.end());
  EXPECT_EQ(readers_seen, (std::vector<int>{0, 1, 2, 3}));
}

TEST(simple_queue, large_messages_cross_processes_intact) {
  fiber::simple_queue<std::vector<double>> in;
  fiber::simple_queue<double> out;
  fiber::process p(&sum_big, in, out);
  p.start().get();
  std::vector<double> big(4 << 20 >> 3, 0.25);  // 4 MiB
  in.put(big).get();
  EXPECT_DOUBLE_EQ(out.get().get(), 0.25 * double(big.size()));
  p.join().get();
}

TEST(simple_queue, oversized_message_is_refused_and_the_queue_keeps_working) {
  fiber::context ctx(fiber::config::load({{"max_message_bytes", "1024"}}));
  fiber::simple_queue<std::string> q(ctx);
  fiber_test::expect_error([&] { q.put(std::string(4096, 'x')).get(); }, fiber::errc::message_too_large, "max_message_bytes");
  q.put("small").get();
  EXPECT_EQ(q.get().get(), "small");
}

// Probing found a message over ZeroMQ's 1 GiB default that never arrived although the master's
// limit allowed it (the child's socket kept the default), with put() reporting success.
TEST(simple_queue, a_message_over_a_gib_arrives_when_the_limit_allows_it) {
  FIBER_TEST_LOCAL_ONLY("the same sockets as the local run; a GiB through a container adds time, not checks");
  fiber::context ctx(fiber::config::load({{"max_message_bytes", std::to_string(std::uint64_t{3} << 29)}}));
  fiber::simple_queue<std::string> in(ctx);
  fiber::simple_queue<std::uint64_t> out(ctx);
  fiber::process p(ctx, &size_of_one, in, out);
  p.start().get();
  const std::size_t size = (std::size_t{1} << 30) + (std::size_t{1} << 26);  // 1.0625 GiB
  {
    std::string big(size, 'a');
    big[size / 2] = 'z';
    in.put(std::move(big)).get();
  }
  // Bounded so that a message lost on the way fails here instead of hanging the suite.
  EXPECT_EQ(out.get(std::chrono::minutes(2)).get(), std::optional<std::uint64_t>(size + 'z'));
  p.terminate().get();
}

TEST(simple_queue, message_of_the_wrong_type_is_an_error_not_a_crash) {
  fiber::simple_queue<std::string> strings;
  // The same queue seen with another element type, as a confused program might.
  fiber::writer w;
  w.value(strings);
  std::vector<std::span<const std::byte>> none;
  fiber::reader r({reinterpret_cast<const std::byte*>(w.head().data()), w.head().size()}, none);
  auto as_doubles = r.value<fiber::simple_queue<std::vector<double>>>();
  strings.put("abc").get();
  fiber_test::expect_error([&] { (void)as_doubles.get().get(); }, fiber::errc::malformed_message);
  strings.put("next").get();
  EXPECT_EQ(strings.get().get(), "next");
}

// The awaitable API, on the caller's own io_context.
FIBER_CO_TEST(simple_queue, awaitable_put_and_get_with_a_child) {
  fiber::simple_queue<std::string> in(ctx), out(ctx);
  fiber::process p(ctx, &relay, in, out, 3);
  co_await p.start();
  for (auto word : {"one", "two", "three"}) co_await in.put(word);
  EXPECT_EQ(co_await out.get(), "one relayed");
  EXPECT_EQ(co_await out.get(), "two relayed");
  EXPECT_EQ(co_await out.get(), "three relayed");
  EXPECT_EQ(co_await out.get(std::chrono::milliseconds(1)), std::nullopt);  // nothing more came
  co_await p.join();
  EXPECT_EQ(p.exitcode(), 0);
}
