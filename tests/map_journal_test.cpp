// What a durable run's pools write of their maps and read back, on real journal files: a map taken
// up again keeps its results and its inputs' identity; another function, other inputs or other
// chunks are errors that name both; what the last master wrote is not written twice.
#include "primitives/pool/map_journal.hpp"

#include <gtest/gtest.h>

#include "fiber/detail/pool_items.hpp"
#include "fiber/error.hpp"
#include "run_folder.hpp"

namespace {
using namespace fiber::detail;

std::filesystem::path path_of(const std::string& name) {
  return fiber_test::run_folder() / "map-journals" / (name + ".journal");
}

/// Writes through a map_journal over what `p` holds, then syncs.
template <class F>
void session(const std::filesystem::path& p, F f) {
  journal_writer out(p, 1 << 20);
  map_journal j(read_journal(p), out);
  f(j);
  out.sync();
}

/// A worker's message of one result whose head is `text`'s bytes, as map_journal reads frames.
struct one_result {
  explicit one_result(std::string_view text) {
    fiber::writer w;
    w.head().push_back(item_value);
    item_writer(w).add([&](fiber::writer& x) { x.head().append(text); });
    frame = w.head();
  }
  void journal(map_journal& j, std::uint32_t pool, std::uint32_t call, std::uint64_t item) const {
    std::string_view f(frame);
    j.results(pool, call, item, 0, 1, std::span<const std::string_view>(&f, 1));
  }
  std::string frame;
};

/// What past_map::results holds for a result whose head is `text`'s bytes.
std::string held(std::string_view text) {
  return map_journal::packed_result(std::as_bytes(std::span(text.data(), text.size())), {});
}

std::string config_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::config_error);
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(map_journal, a_map_taken_up_again_has_its_results_and_writes_nothing_twice) {
  auto p = path_of("again");
  session(p, [](map_journal& j) {
    j.begin(1, 2, "square");
    j.chunk(1, 2, 0, 3, chunk_hash("abc"));
    one_result("r0").journal(j, 1, 2, 0);
    one_result("r2").journal(j, 1, 2, 2);
  });
  auto records = read_journal(p).records.size();
  session(p, [](map_journal& j) {
    auto* past = j.past(1, 2);
    ASSERT_NE(past, nullptr);
    EXPECT_EQ(past->function, "square");
    EXPECT_EQ(past->results.size(), 2u);
    EXPECT_EQ(past->results.at(2), held("r2"));
    EXPECT_FALSE(past->ended);
    EXPECT_EQ(j.past(1, 3), nullptr);
    j.begin(1, 2, "square");                 // the same map: nothing new
    j.chunk(1, 2, 0, 3, chunk_hash("abc"));  // the same inputs: nothing new
  });
  EXPECT_EQ(read_journal(p).records.size(), records);
  session(p, [](map_journal& j) {
    one_result("r1").journal(j, 1, 2, 1);
    j.end(1, 2);
  });
  journal_writer out(p, 1 << 20);
  map_journal j(read_journal(p), out);
  EXPECT_TRUE(j.past(1, 2)->ended);
  EXPECT_EQ(j.past(1, 2)->results.size(), 3u);
}

TEST(map_journal, another_function_in_the_same_place_is_an_error_naming_both) {
  auto p = path_of("function");
  session(p, [](map_journal& j) { j.begin(0, 0, "square"); });
  session(p, [](map_journal& j) {
    auto why = config_error_of([&] { j.begin(0, 0, "cube"); });
    EXPECT_NE(why.find("square"), std::string::npos) << why;
    EXPECT_NE(why.find("cube"), std::string::npos) << why;
    EXPECT_NE(why.find("run_id"), std::string::npos) << why;
  });
}

TEST(map_journal, other_inputs_or_other_chunks_are_errors_naming_the_items) {
  auto p = path_of("inputs");
  session(p, [](map_journal& j) {
    j.begin(0, 1, "f");
    j.chunk(0, 1, 0, 4, chunk_hash("1234"));
    j.chunk(0, 1, 4, 4, chunk_hash("5678"));
  });
  session(p, [](map_journal& j) {
    auto why = config_error_of([&] { j.chunk(0, 1, 4, 4, chunk_hash("5679")); });
    EXPECT_NE(why.find("items 4 to 7 of map 1 of pool 0 (f)"), std::string::npos) << why;
    EXPECT_NE(why.find("input changed"), std::string::npos) << why;
    why = config_error_of([&] { j.chunk(0, 1, 2, 4, chunk_hash("3456")); });
    EXPECT_NE(why.find("other chunks"), std::string::npos) << why;
    why = config_error_of([&] { j.chunk(0, 1, 0, 2, chunk_hash("12")); });
    EXPECT_NE(why.find("other chunks"), std::string::npos) << why;
    j.chunk(0, 1, 8, 4, chunk_hash("9abc"));  // past what the journal has: new, and written
  });
  journal_writer out(p, 1 << 20);
  map_journal j(read_journal(p), out);
  EXPECT_EQ(j.past(0, 1)->chunks.size(), 3u);
}

TEST(map_journal, records_of_another_kind_or_shape_are_left_out) {
  auto p = path_of("foreign");
  {
    journal_writer out(p, 1 << 20);
    out.append({map_journal::map_chunk, 0, 0, 0, "short"});  // not two u64
    out.append({99, 0, 0, 0, "another part's"});
    out.sync();
  }
  journal_writer out(p, 1 << 20);
  map_journal j(read_journal(p), out);
  ASSERT_NE(j.past(0, 0), nullptr);
  EXPECT_TRUE(j.past(0, 0)->chunks.empty());
}

// A worker is found again by its point and taken up by the engine's name for it: a container's
// id, a pod's, a Slurm job's. A record from a master that wrote no such name is still read.
TEST(map_journal, a_pools_workers_come_back_with_their_point_secret_and_engine_name) {
  auto p = path_of("workers");
  session(p, [](map_journal& j) {
    j.worker(1, 4242, "tcp:10.0.0.7:40001", "s3cret", "3f2a9c0d11e4");
    j.worker(2, 17, "fiber-reattach-x", "other", "17");
  });
  {
    journal_writer out(p, 1 << 20);
    out.append({map_journal::pool_worker, 1, 0, 99, "fiber-reattach-y\nolder"});  // no handle
    out.append({map_journal::pool_worker, 1, 0, 98, "no secret"});                  // not a worker record
    out.sync();
  }
  journal_writer out(p, 1 << 20);
  map_journal j(read_journal(p), out);
  auto w = j.past_workers(1);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].pid, 4242);
  EXPECT_EQ(w[0].name, "tcp:10.0.0.7:40001");
  EXPECT_EQ(w[0].secret, "s3cret");
  EXPECT_EQ(w[0].handle, "3f2a9c0d11e4");
  EXPECT_EQ(w[1].name, "fiber-reattach-y");
  EXPECT_EQ(w[1].secret, "older");
  EXPECT_EQ(w[1].handle, "");
  ASSERT_EQ(j.past_workers(2).size(), 1u);
  EXPECT_EQ(j.past_workers(2)[0].handle, "17");
  EXPECT_TRUE(j.past_workers(3).empty());
}

TEST(map_journal, the_chunk_hash_is_xxh3_and_chains_through_its_seed) {
  EXPECT_EQ(chunk_hash(""), 0x2d06800538d394c2ull);  // XXH3-64 of nothing, as xxHash's own tests give it
  EXPECT_NE(chunk_hash("ab"), chunk_hash("ba"));
  EXPECT_NE(chunk_hash("b", chunk_hash("a")), chunk_hash("b"));
}

}  // namespace
