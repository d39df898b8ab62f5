// A recorded run's trace opened in Perfetto's own UI (tests/perfetto_ui.hpp: the official UI and
// its WebAssembly trace processor in headless Chromium), in both of fiber's formats: the UI loads
// it with no error or data loss and holds a slice per task the run recorded, an arrow to each, the
// tracks named as the run named them; a recording cut short still loads and says where it was cut.
#include <fiber/fiber.hpp>
#include <fiber/history.hpp>
#include <gtest/gtest.h>

#include <fstream>
#include <numeric>

#include "perfetto_ui.hpp"
#include "record_folder.hpp"
#include "support.hpp"

namespace {
int cube(int x) { return x * x * x; }
}  // namespace
FIBER_REMOTE(cube);

namespace {

using fiber::trace_format;

/// Chromium and the UI are test tools: scripts/test.sh installs both. Where tests must not skip
/// (CI), their absence fails the test.
#define FIBER_TEST_NEEDS_PERFETTO_UI()                                                                     \
  do {                                                                                                      \
    if (::fiber_test::chromium_path().empty() || ::fiber_test::perfetto_ui_path().empty()) {                 \
      if (::fiber_test::engines_required())                                                                 \
        FAIL() << "no Chromium or no Perfetto UI: scripts/test.sh installs chromium and runs scripts/perfetto_ui.sh"; \
      GTEST_SKIP() << "no Chromium (/usr/bin/chromium) or no Perfetto UI (scripts/perfetto_ui.sh fetches it)"; \
    }                                                                                                       \
  } while (0)

/// Runs a pool of 3 over `n` items, a task each, recorded with `cfg`; returns the run.
fiber::recorded_run record_a_map(const fiber::config& cfg, int n = 40) {
  {
    fiber::context ctx(cfg);
    fiber::pool p(ctx, fiber::pool_options{.processes = 3});
    std::vector<int> xs(static_cast<std::size_t>(n));
    std::iota(xs.begin(), xs.end(), 1);
    EXPECT_EQ(p.map(&cube, xs, 1).get().size(), xs.size());
    p.close();
    p.join().get();
  }
  auto runs = fiber::run_history(cfg);
  EXPECT_EQ(runs.size(), 1u);
  return runs.at(0);
}

std::int64_t count(fiber_test::perfetto_trace& ui, const std::string& where) {
  return ui.number("select count(*) from slice where " + where);
}

/// What the UI shows of a whole run of record_a_map, in either format.
void expect_the_run(fiber_test::perfetto_trace& ui, const fiber::recorded_run& run) {
  EXPECT_EQ(ui.problems(), "") << "the trace processor's error and data-loss stats";
  EXPECT_EQ(count(ui, "name = 'task'"), static_cast<std::int64_t>(run.tasks_done));
  EXPECT_EQ(ui.number("select count(*) from flow f join slice s on s.id = f.slice_in where s.name = 'task'"),
            static_cast<std::int64_t>(run.tasks_done))
      << "an arrow from each task's sending to its span";
  EXPECT_EQ(count(ui, "name = 'map 1'"), 1);
  // Each task's span on a track named by its worker, never by a number alone.
  auto workers = ui.query(
      "select distinct coalesce(th.name, t.name) as worker from slice s join track t on s.track_id = t.id "
      "left join thread_track tt on tt.id = t.id left join thread th using (utid) where s.name = 'task'");
  EXPECT_FALSE(workers.empty());
  for (auto& w : workers) EXPECT_TRUE(w.at("worker").as_string().starts_with("PoolWorker-1-")) << w;
}

TEST(perfetto_trace, a_runs_json_trace_loads_in_perfettos_ui_with_a_slice_per_task_and_no_error) {
  FIBER_TEST_NEEDS_PERFETTO_UI();
  record_folder dir("perfetto-json");
  auto run = record_a_map(dir.cfg());
  auto out = dir.path / "run.json";
  (void)fiber::write_trace(run.id, out.string(), trace_format::chrome_json, dir.cfg());
  fiber_test::perfetto_trace ui(out);
  expect_the_run(ui, run);
  // The pool and the program by their names (Chrome's format adds a number: the pool's, the pid).
  EXPECT_EQ(ui.number("select count(*) from process where name = 'pool' and pid = 1"), 1);
  EXPECT_EQ(ui.number("select count(*) from process where pid = " + std::to_string(::getpid()) + " and name = " +
                      "'perfetto_trace_test'"),
            1);
}

TEST(perfetto_trace, a_runs_native_trace_loads_in_perfettos_ui_named_as_the_run_names_it) {
  FIBER_TEST_NEEDS_PERFETTO_UI();
  record_folder dir("perfetto-native");
  auto run = record_a_map(dir.cfg());
  auto out = dir.path / "run.perfetto-trace";
  (void)fiber::write_trace(run.id, out.string(), trace_format::perfetto, dir.cfg());
  fiber_test::perfetto_trace ui(out);
  expect_the_run(ui, run);
  // The groups at the top, the program first, then the pool, each with its tracks under it.
  // The rows the UI shows at first: the program, then the pool, each by its name.
  EXPECT_EQ(ui.page().eval("JSON.stringify(window.app.trace.workspace.children.map(n => n.name))").as_string(),
            R"(["perfetto_trace_test","pool 1"])");
  // Each row draws its own work before it is expanded: the run, the map.
  EXPECT_EQ(count(ui, "name = 'run' and track_id in (select id from track where name = 'perfetto_trace_test')"), 1);
  EXPECT_EQ(count(ui, "name = 'map 1' and track_id in (select id from track where name = 'pool 1')"), 1);
  EXPECT_EQ(ui.number("select count(*) from track w join track p on w.parent_id = p.id where p.name = 'pool 1' and "
                      "w.name glob 'PoolWorker-1-*'"),
            3);
  // The pool's queues as counters: the tasks its workers hold, the items waiting to be sent.
  for (const char* counter : {"tasks held by workers", "items waiting to be sent"})
    EXPECT_GT(ui.number(std::string("select count(*) from counter c join counter_track t on c.track_id = t.id where "
                                    "t.name = '") + counter + "'"),
              0)
        << counter;
  // A picture for the docs: both groups expanded.
  ui.page().eval("(async () => { window.app.trace.workspace.children.forEach(n => n.expand()); "
                 "await window.waitForPerfettoIdle(200); return true; })()");
  auto shot = fiber_test::artifacts() / "perfetto-trace.png";
  std::ofstream(shot) << ui.page().screenshot();
  std::cout << "the trace in Perfetto's UI, expanded: " << shot.string() << "\n";
}

TEST(perfetto_trace, a_recording_cut_short_still_loads_and_says_where_it_was_cut) {
  FIBER_TEST_NEEDS_PERFETTO_UI();
  record_folder dir("perfetto-cut");
  auto cfg = dir.cfg({{"record_max_bytes", "4096"}});
  auto run = record_a_map(cfg, 400);
  ASSERT_TRUE(run.truncated) << "400 tasks' records are more than 4 KiB";
  for (auto format : {trace_format::chrome_json, trace_format::perfetto}) {
    auto out = dir.path / (format == trace_format::perfetto ? "cut.perfetto-trace" : "cut.json");
    (void)fiber::write_trace(run.id, out.string(), format, cfg);
    fiber_test::perfetto_trace ui(out);
    EXPECT_EQ(ui.problems(), "") << out;
    EXPECT_EQ(count(ui, "name glob 'recording cut here*'"), 1) << out;
    EXPECT_LT(count(ui, "name = 'task'"), 400) << out;
    EXPECT_EQ(count(ui, "name = 'map 1'"), 1) << out << ": the map the cut left open ends where the recording does";
  }
}

}  // namespace
