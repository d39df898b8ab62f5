// A recording's records as trace events, without a run: a task's span on its worker's track from
// its sending to its end, with an arrow from its map; a child's span on the processes' track,
// saying how it ended (and why, when fiber ended it); each process's memory as a counter.
#include "core/trace_builder.hpp"

#include "core/chrome_trace_writer.hpp"

#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <vector>
#include <unistd.h>

#include "run_folder.hpp"

namespace {
using fiber::detail::flight_record;
using fiber::detail::record_kind;

flight_record rec(record_kind k, std::uint64_t ns, std::uint32_t a = 0, std::uint64_t b = 0, std::uint64_t c = 0,
                  std::uint64_t d = 0) {
  flight_record r;
  r.kind = k;
  r.ns = ns;
  r.a = a;
  r.b = b;
  r.c = c;
  r.d = d;
  return r;
}

/// The events of a trace built from `records`.
boost::json::array events_of(const std::vector<std::pair<flight_record, std::string>>& records) {
  auto path = fiber_test::run_folder() / ("trace-builder-" + std::to_string(::getpid()) + ".json");
  {
    fiber::detail::chrome_trace_writer out(path.string());
    fiber::detail::trace_builder trace(out);
    for (auto& [r, text] : records) trace.add(r, text);
    trace.finish();
    out.close();
  }
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  std::filesystem::remove(path);
  return boost::json::parse(text).at("traceEvents").as_array();
}

/// Spans on one track must nest or follow each other (Chrome's format has no other way to draw
/// them): each pair on a track is disjoint or one holds the other.
void expect_spans_nest(const boost::json::array& events) {
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::pair<double, double>>> tracks;
  for (auto& e : events)
    if (e.at("ph") == "X") {
      auto from = e.at("ts").to_number<double>();
      tracks[{e.at("pid").as_int64(), e.at("tid").as_int64()}].emplace_back(from, from + e.at("dur").to_number<double>());
    }
  for (auto& [track, spans] : tracks)
    for (auto& a : spans)
      for (auto& b : spans) {
        bool disjoint = a.second <= b.first || b.second <= a.first;
        bool nested = (a.first <= b.first && b.second <= a.second) || (b.first <= a.first && a.second <= b.second);
        EXPECT_TRUE(disjoint || nested) << "spans [" << a.first << ", " << a.second << ") and [" << b.first << ", "
                                        << b.second << ") overlap on track " << track.first << "/" << track.second;
      }
}

const boost::json::object* find(const boost::json::array& events, std::string_view ph, std::string_view name) {
  for (auto& e : events)
    if (e.at("ph").as_string() == ph && e.at("name").as_string() == name) return &e.as_object();
  return nullptr;
}
}  // namespace

TEST(trace_builder, a_task_is_a_span_on_its_workers_track_with_an_arrow_from_its_map) {
  auto events = events_of({
      {rec(record_kind::name, 0, 1), "PoolWorker-1-1"},
      {rec(record_kind::pool_begin, 1000, 2, 7), ""},
      {rec(record_kind::map_begin, 2000, 0, 7, 1, 10), ""},
      {rec(record_kind::worker_up, 3000, 1, 7, 4242), ""},
      {rec(record_kind::task_sent, 4000, 1, 7, 11, fiber::detail::task_sent_items(10, 1)), ""},
      {rec(record_kind::task_done, 9000, 1, 7, 11, 3000), ""},
      // Sent later than its worker says it began (the clocks of two hosts): cut at its sending.
      {rec(record_kind::task_sent, 9500, 1, 7, 12, fiber::detail::task_sent_items(1, 1)), ""},
      {rec(record_kind::task_done, 10000, 1, 7, 12, 2000), ""},
  });
  expect_spans_nest(events);
  auto* span = find(events, "X", "task");
  ASSERT_TRUE(span);
  EXPECT_EQ(span->at("args").at("task").as_int64(), 11);
  EXPECT_EQ(span->at("pid").as_int64(), 1) << "the first pool, numbered 1";
  EXPECT_EQ(span->at("tid").as_int64(), 4242) << "its worker's track, numbered by its pid";
  EXPECT_EQ(span->at("args").at("items").as_int64(), 10);
  // It began where its worker said it ran from (its end less 3 µs), after its sending: its length
  // says what the worker said.
  EXPECT_DOUBLE_EQ(span->at("ts").to_number<double>(), 6.0);
  EXPECT_DOUBLE_EQ(span->at("dur").to_number<double>(), 3.0);
  EXPECT_FALSE(span->at("args").as_object().contains("ran_us"));
  EXPECT_FALSE(span->at("args").as_object().contains("end")) << "a result, as a reader assumes";
  // The next, cut shorter than its worker said, says it.
  const boost::json::object* cut = nullptr;
  for (auto& e : events)
    if (e.at("ph") == "X" && e.at("args").as_object().contains("task") && e.at("args").at("task") == 12) cut = &e.as_object();
  ASSERT_TRUE(cut);
  EXPECT_DOUBLE_EQ(cut->at("ts").to_number<double>(), 9.5);
  EXPECT_EQ(cut->at("args").at("ran_us").as_int64(), 2);
  EXPECT_FALSE(cut->at("args").as_object().contains("items")) << "one item, as a reader assumes";
  // The tasks the workers held: sampled, and the last change written at its own time.
  std::vector<std::pair<double, double>> held;
  for (auto& e : events)
    if (e.at("ph") == "C" && e.at("name") == "tasks")
      held.emplace_back(e.at("ts").to_number<double>(), e.at("args").at("held by workers").to_number<double>());
  ASSERT_FALSE(held.empty());
  EXPECT_EQ(held.front(), std::make_pair(4.0, 1.0));
  EXPECT_EQ(held.back(), std::make_pair(10.0, 0.0));
  // The map's items waiting to be sent: its 10 from its submission, none once its task took them.
  std::vector<std::pair<double, double>> waiting;
  for (auto& e : events)
    if (e.at("ph") == "C" && e.at("name") == "items")
      waiting.emplace_back(e.at("ts").to_number<double>(), e.at("args").at("waiting to be sent").to_number<double>());
  EXPECT_EQ(waiting, (std::vector<std::pair<double, double>>{{2.0, 10.0}, {4.0, 0.0}}));
  auto* from = find(events, "s", "task");
  ASSERT_TRUE(from) << "the arrow from its sending";
  EXPECT_DOUBLE_EQ(from->at("ts").to_number<double>(), 4.0);
  auto* map = find(events, "X", "map 1");
  ASSERT_TRUE(map) << "the map's span, ended where the recording ends: it holds the arrow's start";
  EXPECT_EQ(map->at("tid").as_int64(), from->at("tid").as_int64());
  EXPECT_LE(map->at("ts").to_number<double>(), 4.0);
  EXPECT_GE(map->at("ts").to_number<double>() + map->at("dur").to_number<double>(), 4.0);
}

TEST(trace_builder, a_child_fiber_ended_says_so_and_its_memory_is_a_counter) {
  auto events = events_of({
      {rec(record_kind::name, 0, 3), "PoolWorker-1-2"},
      {rec(record_kind::process_start, 1000, 3, 0, 77), ""},
      {rec(record_kind::memory, 1500, 3, 0, 5'000'000, 8'000'000), ""},
      {rec(record_kind::process_end, 2000, 3, 0, static_cast<std::uint64_t>(-9), 2), "ended by its pool (terminate)"},
  });
  auto* span = find(events, "X", "PoolWorker-1-2");
  ASSERT_TRUE(span);
  EXPECT_EQ(span->at("tid").as_int64(), 77) << "the program's track of the child, numbered by its pid";
  EXPECT_EQ(span->at("args").at("end").as_string(), "ended by its pool (terminate) (signal 9)");
  EXPECT_FALSE(span->at("args").as_object().contains("raised"));
  auto* memory = find(events, "C", "PoolWorker-1-2");
  ASSERT_TRUE(memory);
  ASSERT_TRUE(memory->at("args").as_object().contains("resident MB"));
  EXPECT_DOUBLE_EQ(memory->at("args").at("resident MB").to_number<double>(), 5.0);
}

TEST(trace_builder, maps_and_manager_calls_that_overlap_go_to_tracks_beside_so_that_spans_nest) {
  auto events = events_of({
      {rec(record_kind::name, 0, 1), "PoolWorker-1-1"},
      {rec(record_kind::name, 0, 2), "Manager-1"},
      {rec(record_kind::pool_begin, 1000, 1, 7), ""},
      {rec(record_kind::map_begin, 2000, 0, 7, 1, 2), ""},
      {rec(record_kind::map_begin, 3000, 0, 7, 2, 2), ""},  // a map_async beside the first
      {rec(record_kind::map_end, 5000, 0, 7, 1), ""},
      {rec(record_kind::map_begin, 6000, 0, 7, 3, 2), ""},  // back on the first's track
      {rec(record_kind::map_end, 7000, 0, 7, 2), ""},
      {rec(record_kind::map_end, 8000, 0, 7, 3), ""},
      // A manager's calls run side by side: the second starts before the first ends.
      {rec(record_kind::manager_call, 10000, 2, 1, 5, 4000), "tally.add"},
      {rec(record_kind::manager_call, 11000, 2, 1, 5, 1000), "tally.add"},
      {rec(record_kind::manager_call, 15000, 2, 1, 5, 1000), "tally.add"},
  });
  expect_spans_nest(events);
  auto* first = find(events, "X", "map 1");
  auto* second = find(events, "X", "map 2");
  auto* third = find(events, "X", "map 3");
  ASSERT_TRUE(first && second && third);
  EXPECT_NE(first->at("tid"), second->at("tid"));
  EXPECT_EQ(first->at("tid"), third->at("tid"));
  std::set<std::int64_t> call_tracks;
  for (auto& e : events)
    if (e.at("ph") == "X" && e.at("name") == "tally.add") call_tracks.insert(e.at("tid").as_int64());
  EXPECT_EQ(call_tracks.size(), 2u);
}
