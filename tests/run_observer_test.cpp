// What the top master keeps of its run, on its own: a nested master's recorder batch lands in the
// run's recording under its place in the tree and on this clock, and a child's event is recorded
// by name; nothing is recorded without config record.
#include "runtime/observe/run_observer.hpp"

#include <gtest/gtest.h>

#include "record_folder.hpp"

namespace {
using namespace fiber::detail;

std::vector<read_record> recording_of(const record_folder& dir) {
  auto files = dir.files();
  EXPECT_EQ(files.size(), 1u);
  return files.empty() ? std::vector<read_record>{} : read_flight_file(files[0].string());
}

TEST(run_observer, a_nested_masters_batch_lands_under_its_place_in_the_tree_with_its_pools_ids_its_own) {
  record_folder dir("observer-batch");
  auto cfg = dir.cfg();
  event_loop loop(nullptr, /*standby=*/false);
  std::string batch;
  {
    flight_recorder nested;  // what a nested master's relay hands on
    nested.open_relay(cfg, [&](std::string_view records, std::uint64_t) { batch += records; });
    auto w = nested.name("PoolWorker-1-1");
    nested.record(record_kind::pool_begin, 0, 5, 2, 0, "ignored");
    nested.record(record_kind::task_sent, w, 5, 1, 1);
    nested.close();
  }
  {
    run_observer top(loop, cfg);
    top.open_top("observed");
    top.take_record_batch(3, 0, "0.1", batch);
    top.ending();
    top.close();
  }
  auto records = recording_of(dir);
  bool named = false, pool = false, task = false;
  std::uint32_t worker = 0;
  for (auto& r : records) {
    if (r.r.kind == record_kind::name && r.text == "0.1/PoolWorker-1-1") named = true, worker = r.r.a;
    if (r.r.kind == record_kind::pool_begin) {
      pool = true;
      EXPECT_EQ(r.r.b, (std::uint64_t{3} << 32) | 5) << "the pool's id under its sender's";
      EXPECT_EQ(r.text, "0.1") << "a pool says in which process of the tree it runs";
    }
    if (r.r.kind == record_kind::task_sent) {
      task = true;
      EXPECT_EQ(r.r.a, worker) << "the worker under this recording's number for its name";
    }
  }
  EXPECT_TRUE(named && pool && task);
}

TEST(run_observer, a_childs_event_is_recorded_by_its_name_and_the_last_memory_once) {
  record_folder dir("observer-child");
  event_loop loop(nullptr, /*standby=*/false);
  auto cfg = dir.cfg();  // the observer refers to it, as to the runtime's
  {
    run_observer top(loop, cfg);
    top.open_top("children");
    EXPECT_FALSE(top.shows_pools_upstream()) << "the top master shows its own pools";
    top.record_child_event(record_kind::process_end, "Process-1", 0);
    top.record_last_memory();
    top.ending();  // the memory was recorded already
    top.close();
  }
  int exits = 0, memory = 0;
  for (auto& r : recording_of(dir)) {
    exits += r.r.kind == record_kind::process_end;
    memory += r.r.kind == record_kind::memory;
  }
  EXPECT_EQ(exits, 1);
  EXPECT_EQ(memory, 1);
}

TEST(run_observer, without_record_nothing_is_written) {
  record_folder dir("observer-off");
  event_loop loop(nullptr, /*standby=*/false);
  auto cfg = dir.cfg({{"record", "false"}});
  {
    run_observer top(loop, cfg);
    top.open_top("off");
    EXPECT_FALSE(top.recorder().on());
    top.record_child_event(record_kind::process_end, "Process-1", 0);
    top.ending();
    top.close();
  }
  EXPECT_TRUE(dir.files().empty());
}

}  // namespace
