// The pool's task queue and its wire on their own, without a process: chunks from a sink, results
// and failures back to it at their positions, what a lost worker's tasks become, and bytes from a
// peer that do not hold what they claim.
#include "primitives/pool/task_queue.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "fiber/error.hpp"
#include "pool_test_sinks.hpp"
#include "primitives/pool/wire.hpp"

namespace {
using namespace fiber::detail;
using fiber::writer;
using fiber_test::answering_sink;
using fiber_test::counting_sink;
using fiber_test::submission_of;

/// What a worker sends back for the next `n` items of `t` (all it has left by default): each
/// item's argument times ten.
multipart results_for(const pool_task& t, std::size_t n = 0) {
  if (!n) n = t.count();
  writer results;
  for (std::size_t i = 0; i < n; ++i)
    append_result(results, [&](writer& w) { w.value(static_cast<int>(t.position() + i) * 10); });
  multipart m;
  m.emplace_back(results.head().data(), results.head().size());
  return m;
}

constexpr std::size_t no_limit = std::size_t(1) << 40;
const worker_end killed{"PoolWorker-1", "signal 9"};

/// A queue fed by one counting sink.
struct pool_task_queue : ::testing::Test {
  task_queue q;
  std::shared_ptr<counting_sink> sink;
  void submit(int total, std::size_t chunksize, bool retry = true, std::size_t window = 8) {
    sink = std::make_shared<counting_sink>(total);
    q.feeder().add(submission_of(sink, chunksize, retry));
    q.feed(window, no_limit);
  }
  /// Sends the next task to `worker` and returns what was sent.
  pool_task send_next(const std::string& worker = "w1") {
    auto t = q.take_next();
    auto copy = t;
    q.sent(std::move(t), worker);
    return copy;
  }
};

TEST_F(pool_task_queue, feeds_chunks_within_the_window_and_delivers_results_at_their_positions) {
  submit(10, 3, true, 2);
  EXPECT_EQ(q.waiting(), 2u);  // the window, not the whole input
  EXPECT_EQ(q.queued_items(), 6u);
  std::vector<pool_task> sent;
  while (q.next()) {
    sent.push_back(send_next());
    q.feed(2, no_limit);
  }
  ASSERT_EQ(sent.size(), 4u);  // 3 + 3 + 3 + 1
  EXPECT_EQ(sent.back().count(), 1u);
  EXPECT_EQ(q.running_items(), 10u);
  EXPECT_FALSE(q.drained());
  // Back in reverse order: each result lands at its own position.
  for (auto it = sent.rbegin(); it != sent.rend(); ++it) q.on_results(it->id, "w1", "PoolWorker-1", results_for(*it));
  ASSERT_EQ(sink->results.size(), 10u);
  for (std::size_t i = 0; i < 10; ++i) EXPECT_EQ(sink->results[i], static_cast<int>(i) * 10);
  EXPECT_EQ(sink->finished, 1);
  EXPECT_EQ(q.done(), 10u);
  EXPECT_TRUE(q.drained());
}

TEST_F(pool_task_queue, a_result_from_another_worker_than_the_holder_is_dropped) {
  submit(1, 1);
  auto copy = send_next("w2");
  q.on_results(copy.id, "w1", "PoolWorker-1", results_for(copy));  // the task was resent to w2 since
  EXPECT_TRUE(sink->results.empty());
  q.on_results(copy.id, "w2", "PoolWorker-2", results_for(copy));
  q.on_results(copy.id, "w2", "PoolWorker-2", results_for(copy));  // a duplicate
  EXPECT_EQ(sink->results.size(), 1u);
  EXPECT_EQ(q.done(), 1u);
}

TEST_F(pool_task_queue, a_lost_worker_charges_only_the_task_it_was_running_and_the_rest_go_back_in_order) {
  submit(3, 1);
  std::deque<std::uint64_t> held;
  std::vector<std::uint64_t> ids;
  while (q.next()) {
    held.push_back(send_next().id);
    ids.push_back(held.back());
  }
  EXPECT_EQ(q.items_in(held), 3u);
  q.on_worker_lost(held, killed, true, 3);
  EXPECT_EQ(q.losses().retried(), 3u);
  EXPECT_EQ(q.running_items(), 0u);
  std::vector<int> attempts;
  for (auto id : ids) {
    ASSERT_NE(q.next(), nullptr);
    auto t = q.take_next();
    EXPECT_EQ(t.id, id);  // the original order, at the front
    attempts.push_back(t.attempts);
  }
  EXPECT_EQ(attempts, (std::vector<int>{1, 0, 0}));
}

TEST_F(pool_task_queue, an_item_out_of_attempts_fails_alone_and_without_retries_its_chunk_fails) {
  for (bool retry : {true, false}) {
    task_queue q;
    auto sink = std::make_shared<counting_sink>(2);
    q.feeder().add(submission_of(sink, 2, retry));
    q.feed(8, no_limit);
    int rounds = 0;
    while (sink->errors.empty() && rounds < 10) {
      ++rounds;
      auto t = q.take_next();
      auto id = t.id;
      q.sent(std::move(t), "w1");
      q.on_worker_lost({id}, killed, true, 2);  // the pool retries; the call may not
    }
    EXPECT_EQ(rounds, retry ? 2 : 1);
    EXPECT_EQ(sink->errors[0], fiber::errc::worker_lost);
    EXPECT_NE(sink->reasons[0].find("item 0"), std::string::npos) << sink->reasons[0];
    EXPECT_NE(sink->reasons[0].find("PoolWorker-1 when it ended (signal 9)"), std::string::npos) << sink->reasons[0];
    if (retry) {
      // The item that was running fails alone; the other runs again, uncharged.
      EXPECT_EQ(sink->errors.size(), 1u);
      ASSERT_NE(q.next(), nullptr);
      auto rest = q.take_next();
      EXPECT_EQ(rest.position(), 1u);
      EXPECT_EQ(rest.attempts, 0);
      EXPECT_EQ(sink->finished, 0);
    } else {
      // Without retries none runs twice: the item after it may have run too.
      ASSERT_EQ(sink->errors.size(), 2u);
      EXPECT_NE(sink->reasons[1].find("retries are off"), std::string::npos) << sink->reasons[1];
      EXPECT_EQ(sink->finished, 1);
    }
  }
}

TEST_F(pool_task_queue, a_death_reruns_only_the_items_not_yet_reported_and_each_is_delivered_once) {
  submit(10, 10);
  auto first = send_next();
  q.on_results(first.id, "w1", "PoolWorker-1", results_for(first, 4), false, 4);
  EXPECT_EQ(sink->results.size(), 4u);
  EXPECT_EQ(q.running_items(), 6u);
  q.on_worker_lost({first.id}, killed, true, 3);
  EXPECT_EQ(q.losses().retried(), 6u);  // not the 4 reported
  // Item 4 was running: it runs again alone, on a worker given nothing else, so that the next
  // death is surely its; the rest follow in pieces of a quarter chunk (here 2 items), reporting
  // item by item at first.
  auto charged = send_next("w2");
  EXPECT_EQ(charged.position(), 4u);
  EXPECT_EQ(charged.count(), 1u);
  EXPECT_EQ(charged.attempts, 1);
  EXPECT_TRUE(charged.alone);
  std::vector<pool_task> pieces;
  while (q.next()) pieces.push_back(send_next("w3"));
  ASSERT_EQ(pieces.size(), 3u);  // 5-6, 7-8, 9
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_EQ(pieces[i].position(), 5 + 2 * i);
    EXPECT_EQ(pieces[i].count(), i < 2 ? 2u : 1u);
    EXPECT_EQ(pieces[i].attempts, 0);
    EXPECT_FALSE(pieces[i].alone);
    EXPECT_TRUE(pieces[i].careful);
    EXPECT_EQ(pieces[i].args, first.args);  // the chunk's items, packed once
  }
  // Item 4's result clears its charge: it was not what killed the worker.
  q.on_results(charged.id, "w2", "PoolWorker-2", results_for(charged));
  EXPECT_EQ(q.in_flight(charged.id), nullptr);
  // A late batch from the dead worker changes nothing.
  q.on_results(first.id, "w1", "PoolWorker-1", results_for(pieces[0], 2), false, 2);
  q.on_results(pieces[0].id, "w3", "PoolWorker-3", results_for(pieces[0], 1), false, 1);
  q.on_results(pieces[0].id, "w3", "PoolWorker-3", results_for(*q.in_flight(pieces[0].id)));
  for (std::size_t i = 1; i < pieces.size(); ++i) q.on_results(pieces[i].id, "w3", "PoolWorker-3", results_for(pieces[i]));
  ASSERT_EQ(sink->results.size(), 10u);
  for (std::size_t i = 0; i < 10; ++i) EXPECT_EQ(sink->results[i], static_cast<int>(i) * 10);
  EXPECT_EQ(q.done(), 10u);
  EXPECT_EQ(sink->finished, 1);
  EXPECT_TRUE(q.drained());
}

TEST_F(pool_task_queue, an_item_that_kills_every_worker_fails_at_its_position_and_only_it) {
  submit(5, 5);
  auto t = send_next();
  q.on_results(t.id, "w1", "PoolWorker-1", results_for(t, 2), false, 2);  // items 0 and 1 done
  for (int death = 0; death < 3; ++death) {
    q.on_worker_lost({t.id}, killed, true, 3);
    if (death < 2) t = send_next();
  }
  ASSERT_EQ(sink->errors.size(), 1u);
  EXPECT_EQ(sink->errors[2], fiber::errc::worker_lost);
  EXPECT_NE(sink->reasons[2].find("item 2"), std::string::npos) << sink->reasons[2];
  EXPECT_NE(sink->reasons[2].find("3 worker(s) lost running it"), std::string::npos) << sink->reasons[2];
  // The items after it run again, uncharged.
  for (std::size_t at = 3; q.next(); ++at) {
    auto rest = send_next();
    EXPECT_EQ(rest.position(), at);
    EXPECT_EQ(rest.attempts, 0);
    q.on_results(rest.id, "w1", "PoolWorker-1", results_for(rest));
  }
  EXPECT_EQ(sink->results.size(), 4u);
  EXPECT_EQ(sink->finished, 1);
}

TEST_F(pool_task_queue, a_timed_out_item_fails_with_timed_out_or_runs_again_and_the_rest_go_back) {
  for (bool retry_timed_out : {false, true}) {
    task_queue q;
    auto sink = std::make_shared<counting_sink>(3);
    auto sub = submission_of(sink, 3);
    sub->timeout = std::chrono::milliseconds(250);
    sub->retry_timed_out = retry_timed_out;
    q.feeder().add(sub);
    q.feed(8, no_limit);
    auto t = q.take_next();
    auto id = t.id;
    q.sent(std::move(t), "w1");
    q.on_timed_out({id}, "PoolWorker-1", 3);
    ASSERT_NE(q.next(), nullptr);
    auto again = q.take_next();
    if (retry_timed_out) {
      EXPECT_TRUE(sink->errors.empty());
      EXPECT_EQ(again.position(), 0u);
      EXPECT_EQ(again.attempts, 1);
      EXPECT_TRUE(again.alone);
    } else {
      EXPECT_TRUE(again.careful);
      ASSERT_EQ(sink->errors.size(), 1u);
      EXPECT_EQ(sink->errors[0], fiber::errc::timed_out);
      EXPECT_NE(sink->reasons[0].find("item 0"), std::string::npos) << sink->reasons[0];
      EXPECT_NE(sink->reasons[0].find("task_timeout (250 ms)"), std::string::npos) << sink->reasons[0];
      EXPECT_EQ(again.position(), 1u);
      EXPECT_EQ(again.attempts, 0);
    }
  }
}

TEST_F(pool_task_queue, a_chunk_over_the_message_limit_fails_its_items_without_being_queued) {
  sink = std::make_shared<counting_sink>(4);
  q.feeder().add(submission_of(sink, 2));
  q.feed(8, 10);  // two packed ints are more than 10 bytes
  EXPECT_EQ(q.waiting(), 0u);
  ASSERT_EQ(sink->errors.size(), 4u);
  EXPECT_EQ(sink->errors[3], fiber::errc::message_too_large);
  EXPECT_EQ(sink->finished, 1);
}

TEST_F(pool_task_queue, failing_everything_reaches_queued_running_and_unproduced_items) {
  submit(100, 1, true, 3);
  send_next();
  q.fail_all(std::make_exception_ptr(fiber::error(fiber::errc::closed, "terminated")));
  EXPECT_EQ(sink->errors.size(), 3u);  // one running, two queued
  EXPECT_EQ(sink->input_failed_at, 3);  // the rest were never produced
  EXPECT_EQ(sink->finished, 1);
  EXPECT_TRUE(q.drained());
  EXPECT_FALSE(q.busy());
}

TEST(pool_task_queue_answered, a_call_that_has_its_answer_drops_its_queued_tasks_and_input) {
  task_queue q;
  auto sink = std::make_shared<answering_sink>();
  q.feeder().add(std::make_shared<pool_submission>(pool_submission{7, 1, sink, true, {}}));
  q.feed(4, no_limit);  // 4 of the 10 produced, one task each
  auto first = q.take_next();
  auto id = first.id;
  q.sent(std::move(first), "w1");
  EXPECT_EQ(q.queued_items(), 3u);
  writer results;
  remote_failure f;
  f.type = "std::invalid_argument";
  f.message = "no";
  append_failed_item(results, f);
  multipart m;
  m.emplace_back(results.head().data(), results.head().size());
  q.on_results(id, "w1", "PoolWorker-1", std::move(m));
  ASSERT_EQ(sink->failed.size(), 1u);  // the one that failed, and no other item
  EXPECT_EQ(sink->failed[0].first, 0u);
  EXPECT_TRUE(sink->failed[0].second.starts_with("item 0 (")) << sink->failed[0].second;
  EXPECT_EQ(q.queued_items(), 0u);  // the 3 queued tasks were dropped
  EXPECT_EQ(sink->next, 4);         // and the input was read no further
  EXPECT_EQ(sink->finished, 1);
  EXPECT_TRUE(q.drained());
}

TEST(pool_task_queue_answered, a_chunk_over_the_limit_of_a_call_that_then_has_its_answer_ends_it_and_feeds_the_next) {
  // The first failed item answers the call: its input is dropped while the chunk is being fed.
  task_queue q;
  auto answered = std::make_shared<answering_sink>();
  auto after = std::make_shared<counting_sink>(3);
  q.feeder().add(std::make_shared<pool_submission>(pool_submission{7, 2, answered, true, {}}));
  q.feeder().add(submission_of(after, 1));
  q.feed(8, 20);  // two packed ints are more than 20 bytes; one is not
  EXPECT_EQ(answered->failed.size(), 2u);  // the two items of the chunk that failed, and no other
  EXPECT_EQ(answered->next, 2);           // its input read no further
  EXPECT_EQ(answered->finished, 1);
  EXPECT_EQ(q.waiting(), 3u);  // the next call's three chunks of one
  EXPECT_EQ(after->errors.size(), 0u);
}

TEST_F(pool_task_queue, a_result_that_does_not_hold_its_items_fails_them_as_malformed) {
  submit(2, 2);
  auto id = send_next().id;
  multipart junk;
  junk.emplace_back("\x00\x05\x00\x00\x00\x00\x00\x00\x00", 9);  // claims 5 bytes, has none
  q.on_results(id, "w1", "PoolWorker-1", std::move(junk));
  ASSERT_EQ(sink->errors.size(), 2u);
  EXPECT_EQ(sink->errors[1], fiber::errc::malformed_message);
}

TEST_F(pool_task_queue, a_partial_claiming_every_item_left_is_malformed) {
  submit(2, 2);
  auto t = send_next();
  q.on_results(t.id, "w1", "PoolWorker-1", results_for(t), false, 2);  // only the final result may
  ASSERT_EQ(sink->errors.size(), 2u);
  EXPECT_EQ(sink->errors[0], fiber::errc::malformed_message);
}

TEST(pool_wire, items_round_trip_with_their_large_frames_and_a_failure_keeps_its_place) {
  writer chunk;
  item_writer items(chunk);
  items.add([](writer& w) { w.value(std::string("small")); });
  items.add([](writer& w) { w.value(std::vector<char>(100000, 'x')); });
  multipart m;
  m.emplace_back(chunk.head().data(), chunk.head().size());
  for (auto& b : chunk.blobs()) m.emplace_back(b.data, b.size);
  ASSERT_FALSE(chunk.blobs().empty());  // the large value travels as a frame of its own
  auto read = unpack(m, 0, 2, false);
  ASSERT_EQ(read.size(), 2u);
  EXPECT_TRUE(read[0].blobs.empty());
  EXPECT_EQ(read[1].blobs.size(), chunk.blobs().size());

  writer results;
  append_result(results, [](writer& w) { w.value(1); });
  append_result(results, [](writer&) { throw std::runtime_error("boom"); });
  append_result(results, [](writer& w) { w.value(3); });
  multipart r;
  r.emplace_back(results.head().data(), results.head().size());
  auto back = unpack(r, 0, 3, true);
  EXPECT_EQ(back[0].status, item_value);
  EXPECT_EQ(back[1].status, item_raised);
  EXPECT_EQ(back[2].status, item_value);
}

TEST(pool_wire, bytes_that_do_not_hold_the_items_they_claim_are_malformed) {
  auto malformed = [](multipart m, std::size_t count, bool with_status) {
    try {
      (void)unpack(m, 0, count, with_status);
      return false;
    } catch (const fiber::error& e) {
      return e.code() == fiber::errc::malformed_message;
    }
  };
  multipart none;
  EXPECT_TRUE(malformed(std::move(none), 1, false));  // no packed frame
  multipart short_header;
  short_header.emplace_back("\x01\x00\x00", 3);
  EXPECT_TRUE(malformed(std::move(short_header), 1, false));
  multipart missing_frame;
  missing_frame.emplace_back("\x00\x00\x00\x00\x01\x00\x00\x00", 8);  // one large frame, none follows
  EXPECT_TRUE(malformed(std::move(missing_frame), 1, false));
  multipart trailing;
  trailing.emplace_back("\x00\x00\x00\x00\x00\x00\x00\x00!", 9);
  EXPECT_TRUE(malformed(std::move(trailing), 1, false));
  multipart absurd;  // four billion items in 8 bytes: refused before allocating for them
  absurd.emplace_back("\x00\x00\x00\x00\x00\x00\x00\x00", 8);
  EXPECT_TRUE(malformed(std::move(absurd), 4000000000u, false));
}

}  // namespace
