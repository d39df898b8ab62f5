// imap and imap_unordered as a long stream: the chunks a stream chooses by itself (as map does
// for an input of known size, growing from one item for an input of unknown size, never past
// stream_chunk_limit), and results handed over a batch at a time, each error at its position.
// The chunks are read back from the flight recorder, where the master wrote what it sent.
#include <forward_list>
#include <ranges>

#include "core/flight_recorder.hpp"
#include "pool_support.hpp"
#include "record_folder.hpp"

namespace {
using fiber::detail::record_kind;

/// The number of items of each task the last run recorded in `dir` sent, in the order sent.
std::vector<std::uint64_t> chunks_sent(const record_folder& dir) {
  auto runs = fiber::run_history(dir.cfg());
  EXPECT_EQ(runs.size(), 1u);
  std::vector<std::uint64_t> out;
  if (runs.empty()) return out;
  for (auto& [r, text] : fiber::detail::read_flight_file(runs[0].path))
    if (r.kind == record_kind::task_sent) out.push_back(fiber::detail::items_of_task(r.d));
  return out;
}
}  // namespace

// 800 items on two workers: chunks of 100, as map would choose (about four a worker), where
// the stream used to send them one by one.
TEST(pool_stream, imap_over_a_sized_input_chooses_its_chunks_as_map_does) {
  record_folder run("sized");
  std::vector<int> xs(800);
  std::iota(xs.begin(), xs.end(), 0);
  {
    fiber::context ctx(run.cfg());
    fiber::pool p(ctx, 2);
    long long sum = 0;
    for (int y : p.imap(&square, xs)) sum += y;
    EXPECT_EQ(sum, 799LL * 800 * 1599 / 6);
  }
  auto chunks = chunks_sent(run);
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(*std::max_element(chunks.begin(), chunks.end()), 100u);
  EXPECT_EQ(chunks.size(), 8u) << "four chunks a worker";
}

// An input that does not know its size: the first chunk is one item (its result comes at once),
// then chunks double, up to stream_chunk_limit.
TEST(pool_stream, imap_over_an_input_of_unknown_size_grows_its_chunks_up_to_the_limit) {
  record_folder run("unsized");
  std::forward_list<int> xs(20000, 1);  // no size() to ask
  static_assert(!std::ranges::sized_range<decltype(xs)>);
  {
    fiber::context ctx(run.cfg());
    fiber::pool p(ctx, 2);
    int expected = 0;
    for (int y : p.imap_unordered(&square, xs)) {
      (void)y;
      ++expected;
    }
    EXPECT_EQ(expected, 20000);
  }
  auto chunks = chunks_sent(run);
  ASSERT_GE(chunks.size(), 3u);
  EXPECT_EQ(chunks[0], 1u);
  EXPECT_EQ(chunks[1], 2u);
  EXPECT_EQ(*std::max_element(chunks.begin(), chunks.end()), fiber::pool::stream_chunk_limit);
}

// A batch holds the results before an error; the error is the next call's, then the stream goes
// on with the results after it.
TEST(pool_stream, next_batch_hands_over_results_in_order_and_each_error_at_its_position) {
  fiber::pool p(2);
  std::vector<int> xs(100);
  std::iota(xs.begin(), xs.end(), 1);
  auto stream = p.imap(&fail_on_multiples_of_20, xs, 7);
  std::vector<int> got;
  int errors = 0;
  for (;;) {
    try {
      auto batch = stream.next_batch().get();
      if (batch.empty()) break;
      for (int y : batch) {
        EXPECT_NE(y % 20, 0) << "a result where an error belongs";
        got.push_back(y);
      }
    } catch (const fiber::error& e) {
      EXPECT_EQ(e.code(), fiber::errc::remote_error) << e.what();
      ++errors;
      EXPECT_EQ(static_cast<int>(got.size()), 20 * errors - errors) << "the error came after the results before it";
    }
  }
  EXPECT_EQ(errors, 5);
  EXPECT_EQ(got.size(), 95u);
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
}

// A batch is never longer than asked.
TEST(pool_stream, next_batch_takes_at_most_what_it_is_asked_for) {
  fiber::pool p(2);
  std::vector<int> xs(500, 3);
  auto stream = p.imap(&square, xs);
  std::size_t total = 0;
  for (auto batch = stream.next_batch(16).get(); !batch.empty(); batch = stream.next_batch(16).get()) {
    EXPECT_LE(batch.size(), 16u);
    total += batch.size();
  }
  EXPECT_EQ(total, 500u);
}
