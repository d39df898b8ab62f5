// A durable run's pool, without a process, on real journal files: a result journaled comes back
// as the message it arrived in (its large frames too), a worker's message of results one record;
// a chunk taken up again is answered from its first item on up to the first without a result;
// another input is the named error; a fiber::shared object counts by its content, not its id (ids
// are random in each run); results past journal_max_bytes are an error for their items, not a
// silent gap.
#include "primitives/pool/durable_maps.hpp"

#include <gtest/gtest.h>

#include <vector>
#include <zmq.hpp>

#include "fiber/codec.hpp"
#include "fiber/error.hpp"
#include "fiber/shared.hpp"
#include "primitives/pool/wire.hpp"
#include "run_folder.hpp"
#include "transport/message_frames.hpp"

namespace {
using namespace fiber::detail;

std::filesystem::path path_of(const std::string& name) {
  return fiber_test::run_folder() / "durable-maps" / (name + ".journal");
}

pool_submission call(std::uint64_t number) {
  pool_submission s{};
  s.recorded_as = number;
  return s;
}

/// The chunk of items [from, from + n) of a map over ints.
fiber::writer chunk_of(int from, int n) {
  fiber::writer w;
  for (int i = from; i < from + n; ++i) w.value(i);
  return w;
}

/// A result's value, and a large frame when `big`.
void encode_result(fiber::writer& w, int v, bool big) {
  w.value(v);
  if (big) w.value(std::vector<std::uint8_t>(64 * 1024, static_cast<std::uint8_t>(v)));
}

/// A result as the pool's master hands it on: its head, and a large frame when `big`.
message result_of(int v, bool big = false) {
  fiber::writer w;
  encode_result(w, v, big);
  return message(message::frames::whole(to_frames(w)));
}

/// A worker's message of results: an item each of `values`, the one equal to `big` with a large
/// frame, one whose value is negative raised in the task.
std::shared_ptr<multipart> message_of(const std::vector<int>& values, int big = -1) {
  fiber::writer w;
  for (int v : values)
    append_result(w, [&](fiber::writer& x) {
      if (v < 0) throw std::runtime_error("negative");
      encode_result(x, v, v == big);
    });
  return std::make_shared<multipart>(to_frames(w));
}

int value_of(const message& m) {
  fiber::reader r(m.head(), m.blobs());
  return r.value<int>();
}

struct journal_on {
  explicit journal_on(const std::filesystem::path& p, std::uint64_t max = 1 << 20)
      : out(p, max), maps(read_journal(p), out), pool(maps, 1, [this] { ++appended; }) {}
  journal_writer out;
  map_journal maps;
  durable_maps pool;
  int appended = 0;
};

TEST(durable_maps, a_chunk_taken_up_again_is_answered_from_the_journal_up_to_its_first_missing_result) {
  auto p = path_of("again");
  auto sub = call(1);
  {
    journal_on j(p);
    j.pool.begin(sub, "square");
    EXPECT_EQ(j.pool.chunk(sub, 0, 4, chunk_of(0, 4)), 0u);  // a new run has nothing to give
    EXPECT_FALSE(j.pool.results(sub, 0, 0, 2, message_of({100, 101}, 101)));
    EXPECT_FALSE(j.pool.results(sub, 3, 0, 1, message_of({103})));  // after a gap: run again
    EXPECT_GT(j.appended, 0);
    j.out.sync();
  }
  std::size_t result_records = 0, results = 0;
  for (auto& r : read_journal(p).records) {
    result_records += r.kind == map_journal::map_results;
    results += map_journal::results_in(r);
  }
  EXPECT_EQ(result_records, 2u) << "a record for each message";
  EXPECT_EQ(results, 3u);
  journal_on j(p);
  j.pool.begin(sub, "square");
  ASSERT_EQ(j.pool.chunk(sub, 0, 4, chunk_of(0, 4)), 2u);
  EXPECT_EQ(value_of(j.pool.past_result(sub, 0)), 100);
  auto big = j.pool.past_result(sub, 1);
  fiber::reader r(big.head(), big.blobs());
  EXPECT_EQ(r.value<int>(), 101);
  auto bytes = r.value<std::vector<std::uint8_t>>();
  ASSERT_EQ(bytes.size(), 64u * 1024);
  EXPECT_EQ(bytes.back(), 101);
  EXPECT_TRUE(r.at_end());
}

TEST(durable_maps, a_chunk_is_answered_whole_only_when_the_journal_holds_each_of_its_results) {
  auto p = path_of("whole");
  auto sub = call(3);
  {
    journal_on j(p);
    j.pool.begin(sub, "square");
    j.pool.chunk(sub, 0, 2, chunk_of(0, 2));
    j.pool.chunk(sub, 2, 2, chunk_of(2, 2));
    EXPECT_FALSE(j.pool.results(sub, 0, 0, 2, message_of({100, 101})));
    EXPECT_FALSE(j.pool.results(sub, 2, 0, 1, message_of({102})));
    j.out.sync();
  }
  journal_on j(p);
  EXPECT_TRUE(j.pool.answered_whole(3, 0));
  EXPECT_FALSE(j.pool.answered_whole(3, 2)) << "item 3 has no result";
  EXPECT_FALSE(j.pool.answered_whole(3, 4)) << "no such chunk";
  EXPECT_FALSE(j.pool.answered_whole(4, 0)) << "no such call";
}

TEST(durable_maps, other_inputs_for_a_journaled_chunk_are_an_error_naming_the_items) {
  auto p = path_of("changed");
  auto sub = call(2);
  {
    journal_on j(p);
    j.pool.begin(sub, "square");
    j.pool.chunk(sub, 0, 3, chunk_of(0, 3));
    j.out.sync();
  }
  journal_on j(p);
  j.pool.begin(sub, "square");
  try {
    j.pool.chunk(sub, 0, 3, chunk_of(1, 3));
    FAIL() << "other inputs were taken as the journal's";
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::config_error);
    EXPECT_NE(std::string(e.what()).find("items 0 to 2 of map 2 of pool 1"), std::string::npos) << e.what();
  }
}

TEST(durable_maps, a_shared_object_counts_by_its_content_and_not_its_id) {
  auto p = path_of("shared");
  journal_on j(p);
  auto chunk_with = [](const fiber::shared<std::vector<int>>& s) {
    fiber::writer w;
    w.send_shared_apart();
    w.value(7);
    w.value(s);
    return w;
  };
  fiber::shared<std::vector<int>> a(std::vector<int>{1, 2, 3}), same(std::vector<int>{1, 2, 3}), other(std::vector<int>{1, 2, 4});
  ASSERT_NE(a.entry()->id(), same.entry()->id());
  auto ca = chunk_with(a), csame = chunk_with(same), cother = chunk_with(other);
  EXPECT_EQ(j.pool.identity(ca), j.pool.identity(csame));
  EXPECT_NE(j.pool.identity(ca), j.pool.identity(cother));
}

TEST(durable_maps, the_entries_a_message_skips_and_the_items_that_raised_are_no_results) {
  auto p = path_of("skips");
  auto sub = call(1);
  {
    journal_on j(p);
    j.pool.begin(sub, "square");
    j.pool.chunk(sub, 0, 4, chunk_of(0, 4));
    // Entries 0 and 1 are the chunk's items the journal answered; item 2 raised.
    EXPECT_FALSE(j.pool.results(sub, 2, 2, 2, message_of({7, 7, -1, 103})));
    j.out.sync();
  }
  journal_on j(p);
  auto* past = j.maps.past(1, 1);
  ASSERT_NE(past, nullptr);
  ASSERT_EQ(past->results.size(), 1u);
  EXPECT_EQ(value_of(j.pool.past_result(sub, 3)), 103);
}

TEST(durable_maps, a_message_of_results_the_journal_cannot_read_gives_none_and_its_items_run_again) {
  auto p = path_of("unreadable");
  auto sub = call(1);
  {
    journal_on j(p);
    j.pool.begin(sub, "square");
    j.pool.chunk(sub, 0, 2, chunk_of(0, 2));
    // Whole records (their checks hold) whose payloads are not messages this part wrote.
    for (std::string bad : {std::string("short"), std::string(12, '\xff'), std::string(40, '\0')})
      j.out.append(map_journal::map_results, 1, 1, 0, {std::string_view(bad)});
    j.out.sync();
  }
  for (auto& r : read_journal(p).records) EXPECT_EQ(map_journal::results_in(r), 0u);
  journal_on j(p);
  j.pool.begin(sub, "square");
  EXPECT_EQ(j.pool.chunk(sub, 0, 2, chunk_of(0, 2)), 0u);
}

TEST(durable_maps, results_past_journal_max_bytes_are_an_error_for_their_items) {
  auto p = path_of("full");
  auto sub = call(1);
  journal_on j(p, 4096);
  j.pool.begin(sub, "square");
  j.pool.chunk(sub, 0, 1, chunk_of(0, 1));
  auto e = j.pool.results(sub, 0, 0, 1, message_of({1}, 1));
  ASSERT_TRUE(e);
  try {
    std::rethrow_exception(e);
  } catch (const fiber::error& x) {
    EXPECT_EQ(x.code(), fiber::errc::journal_failed);
    EXPECT_NE(std::string(x.what()).find("journal_max_bytes"), std::string::npos) << x.what();
  }
}

TEST(durable_maps, a_result_whose_bytes_are_not_whole_is_refused_naming_the_journal) {
  auto packed = durable_maps::pack_result(result_of(5, true));
  EXPECT_EQ(value_of(durable_maps::unpack_result(packed)), 5);
  for (std::size_t cut : {std::size_t{0}, std::size_t{3}, std::size_t{12}, packed.size() - 1}) {
    try {
      (void)durable_maps::unpack_result(std::string_view(packed).substr(0, cut));
      FAIL() << "a result cut at " << cut << " was read";
    } catch (const fiber::error& e) {
      EXPECT_EQ(e.code(), fiber::errc::journal_failed);
    }
  }
  std::string extra = packed + "x";
  EXPECT_THROW((void)durable_maps::unpack_result(extra), fiber::error);
}

}  // namespace
