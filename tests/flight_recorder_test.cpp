// The flight recorder (core/flight_recorder) and what reads it (fiber/history.hpp): a run's
// events in a bounded file, read back whole or up to a cut; a pool's run recorded for real, its
// deaths and timeouts included, and written as a trace with a span per task on its worker's track.
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cstring>
#include <fiber/history.hpp>

#include "core/flight_recorder.hpp"
#include "pool_support.hpp"
#include "record_folder.hpp"
#include "run_folder.hpp"

namespace {
using fiber::detail::flight_recorder;
using fiber::detail::read_flight_file;
using fiber::detail::record_kind;

/// Runs `f` in one child of a context recording with `cfg`, to its end; returns the child's name.
template <class F>
std::string run_in_a_child(const fiber::config& cfg, F f) {
  fiber::context ctx(cfg);
  fiber::process p(ctx, f);
  auto name = p.name();
  p.start().get();
  p.join().get();
  EXPECT_EQ(p.exitcode(), 0);
  return name;
}

void exit_with_code(int code) { std::exit(code); }
int hang_or_double(int x) {
  if (x < 0) std::this_thread::sleep_for(std::chrono::hours(1));  // the task's work: it outlives its timeout
  return 2 * x;
}
}  // namespace
FIBER_REMOTE(hang_or_double);
FIBER_REMOTE(exit_with_code);

TEST(flight_recorder, records_read_back_in_order_with_their_texts_and_a_cut_file_up_to_the_cut) {
  record_folder dir("read");
  {
    flight_recorder rec;
    rec.open(dir.cfg(), "run1");
    ASSERT_TRUE(rec.on());
    auto w = rec.name("PoolWorker-1-1");
    EXPECT_EQ(rec.name("PoolWorker-1-1"), w);  // said once
    rec.record(record_kind::task_sent, w, 7, 1, 10);
    rec.record(record_kind::worker_down, w, 7, static_cast<std::uint64_t>(-9), 1, "signal 9");
  }
  auto files = dir.files();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_TRUE(files[0].filename().string().ends_with("-run1@" + fiber::detail::program_name() + ".fiberrec")) << files[0];
  auto records = read_flight_file(files[0].string());
  std::vector<record_kind> kinds;
  for (auto& r : records) kinds.push_back(r.r.kind);
  EXPECT_EQ(kinds, (std::vector<record_kind>{record_kind::run_begin, record_kind::name, record_kind::task_sent,
                                             record_kind::worker_down, record_kind::run_end}));
  EXPECT_EQ(records[0].r.a, static_cast<std::uint32_t>(::getpid()));
  EXPECT_TRUE(records[0].text.ends_with("\tlocal")) << records[0].text;
  EXPECT_EQ(records[1].text, "PoolWorker-1-1");
  EXPECT_EQ(records[2].r.d, 10u);
  EXPECT_EQ(records[3].text, "signal 9");
  for (std::size_t i = 1; i < records.size(); ++i) EXPECT_GE(records[i].r.ns, records[i - 1].r.ns);

  // Killed while writing: the records before the cut.
  std::filesystem::resize_file(files[0], std::filesystem::file_size(files[0]) - 45);
  EXPECT_EQ(read_flight_file(files[0].string()).size(), records.size() - 2);
  fiber_test::expect_error([&] { (void)read_flight_file((dir.path / "nothing").string()); }, fiber::errc::malformed_message,
                           "cannot read the recorded run");
  std::ofstream(dir.path / "other.fiberrec") << "not a recording";
  fiber_test::expect_error([&] { (void)read_flight_file((dir.path / "other.fiberrec").string()); },
                           fiber::errc::malformed_message, "is not a fiber recording");
}

TEST(flight_recorder, a_run_stops_growing_at_record_max_bytes_and_says_where) {
  record_folder dir("bound");
  {
    flight_recorder rec;
    rec.open(dir.cfg({{"record_max_bytes", "4096"}}), "big");
    for (std::uint64_t t = 0; t < 10000; ++t) rec.record(record_kind::task_sent, 1, 1, t, 1);
  }
  auto files = dir.files();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_LE(std::filesystem::file_size(files[0]), 4096u);
  auto records = read_flight_file(files[0].string());
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back().r.kind, record_kind::truncated);
  auto runs = fiber::run_history(dir.cfg());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(runs[0].truncated);
  EXPECT_FALSE(runs[0].ended);  // its end did not fit
  EXPECT_EQ(runs[0].tasks_sent, records.size() - 2);
}

// In a child that is a master of its own, the records go to the top master (runtime's sink), in
// the file's format, names said once, each time the buffer would go to a file; nothing is written
// here.
TEST(flight_recorder, a_relay_hands_its_records_on_in_the_files_format) {
  record_folder dir("relay");
  std::vector<std::string> batches;
  fiber::detail::flight_recorder rec;
  rec.open_relay(dir.cfg({}), [&](std::string_view records, std::uint64_t now) {
    EXPECT_GT(now, 0u);
    batches.emplace_back(records);
  });
  ASSERT_TRUE(rec.on());
  auto w = rec.name("PoolWorker-1-1");
  EXPECT_EQ(rec.name("PoolWorker-1-1"), w);
  rec.record(fiber::detail::record_kind::task_sent, w, 7, 1, fiber::detail::task_sent_items(3, 1));
  EXPECT_TRUE(batches.empty());  // buffered, as for a file
  rec.record(fiber::detail::record_kind::pool_end, 0, 7);  // a rare event: handed on at once
  ASSERT_EQ(batches.size(), 1u);
  rec.record(fiber::detail::record_kind::task_done, w, 7, 1);
  rec.close();  // the rest
  ASSERT_EQ(batches.size(), 2u);
  std::vector<fiber::detail::record_kind> kinds;
  std::string names;
  for (auto& b : batches)
    for (std::size_t at = 0; at + sizeof(fiber::detail::flight_record) <= b.size();) {
      fiber::detail::flight_record r;
      std::memcpy(&r, b.data() + at, sizeof r);
      at += sizeof r;
      if (r.kind == fiber::detail::record_kind::name) names += b.substr(at, r.text_size);
      at += r.text_size;
      kinds.push_back(r.kind);
    }
  using k = fiber::detail::record_kind;
  EXPECT_EQ(kinds, (std::vector<k>{k::name, k::task_sent, k::pool_end, k::task_done}));
  EXPECT_EQ(names, "PoolWorker-1-1");
  EXPECT_TRUE(dir.files().empty());
}

TEST(flight_recorder, a_run_nobody_recorded_is_a_clear_error) {
  record_folder dir("none");
  fiber_test::expect_error([&] { (void)fiber::write_trace("abc", (dir.path / "t.json").string(), dir.cfg()); },
                           fiber::errc::config_error, {"no recorded run matches 'abc'", "fiber history lists them"});
}

// A pool's run for real: three workers, a worker killed while it holds a task, a task past its
// timeout; the history's counts, and the trace's spans, one per task on the track of the worker
// that ran it, none overlapping on a track.
TEST(flight_recorder, a_pool_run_is_recorded_with_its_deaths_and_timeouts_and_traced_a_span_per_task) {
  record_folder dir("pool");
  auto marker = marker_path("recorder-death");
  {
    fiber::context ctx(dir.cfg());
    fiber::pool p(ctx, fiber::pool_options{.processes = 3});
    std::vector<int> xs(30);
    std::iota(xs.begin(), xs.end(), 1);
    EXPECT_EQ(p.map(&square, xs, 1).get().size(), 30u);
    EXPECT_EQ(p.apply(&die_once, 5, marker, SIGKILL).get(), 5);  // its first worker dies, the next runs it
    // The one call with a limit is the one that never ends: no other task can meet it, however
    // loaded the machine.
    fiber_test::expect_error([&] { (void)p.with({.task_timeout = std::chrono::milliseconds(500)}).apply(&hang_or_double, -1).get(); },
                             fiber::errc::timed_out, "task_timeout");
    p.close();
    p.join().get();
    fiber::process child(ctx, &exit_with_code, 3);
    child.start().get();
    child.join().get();
    EXPECT_EQ(child.exitcode(), 3);
  }
  std::filesystem::remove(marker);
  auto runs = fiber::run_history(dir.cfg());
  ASSERT_EQ(runs.size(), 1u);
  auto& run = runs[0];
  EXPECT_TRUE(run.ended);
  EXPECT_EQ(run.pools, 1u);
  EXPECT_EQ(run.maps, 3u);
  EXPECT_EQ(run.tasks_sent, 30u + 2 + 1);  // the killed task twice
  EXPECT_EQ(run.tasks_done, 30u + 1);
  EXPECT_EQ(run.tasks_lost, 1u);
  EXPECT_EQ(run.tasks_timed_out, 1u);
  EXPECT_EQ(run.workers_lost, 1u);
  EXPECT_GE(run.processes, 4u);  // three workers and the process, and the replacements
  // Three, and the replacements of the dead one and the killed one when they connected before the end.
  EXPECT_GE(run.workers_started, 3u);

  auto out = (dir.path / "run.trace.json").string();
  auto traced = fiber::write_trace(run.id.substr(0, 6), out, dir.cfg());
  EXPECT_EQ(traced.id, run.id);
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto events = boost::json::parse(text).at("traceEvents").as_array();
  std::map<std::int64_t, std::string> tracks;  // tid -> worker name
  std::map<std::int64_t, std::vector<std::pair<double, double>>> spans;
  std::map<std::string, int> ends;
  std::vector<std::string> marks;
  std::map<std::int64_t, int> flow_starts, flow_ends;  // by flow id
  std::map<std::string, std::string> processes;        // name -> how it ended
  std::vector<std::pair<std::int64_t, double>> flow_targets;
  for (auto& e : events) {
    auto& o = e.as_object();
    auto ph = o.at("ph").as_string();
    if (ph == "M" && o.at("name").as_string() == "thread_name")
      tracks[o.at("tid").as_int64()] = std::string(o.at("args").at("name").as_string());
    if (ph == "X" && o.at("pid").as_int64() == ::getpid() && o.at("name") != "run") {  // a child of the master
      processes[std::string(o.at("name").as_string())] = std::string(o.at("args").at("end").as_string());
      continue;
    }
    if (ph == "X" && o.at("name").as_string() == "task") {
      auto from = o.at("ts").to_number<double>();
      spans[o.at("tid").as_int64()].emplace_back(from, from + o.at("dur").to_number<double>());
      // A result's span says no end; the others say which.
      auto* end = o.at("args").as_object().if_contains("end");
      ++ends[end ? std::string(end->as_string()) : std::string("result")];
    }
    if (ph == "i") marks.push_back(std::string(o.at("name").as_string()));
    if (ph == "s") ++flow_starts[o.at("id").as_int64()];
    if (ph == "f") {
      ++flow_ends[o.at("id").as_int64()];
      flow_targets.emplace_back(o.at("tid").as_int64(), o.at("ts").to_number<double>());
    }
  }
  // An arrow from its sending to every task: it ends where the task's span begins.
  EXPECT_EQ(flow_starts.size(), 33u);
  EXPECT_EQ(flow_starts, flow_ends);
  for (auto& [tid, ts] : flow_targets)
    EXPECT_TRUE(std::any_of(spans[tid].begin(), spans[tid].end(), [&](auto& span) { return span.first == ts; }))
        << "an arrow to no span's start on " << tracks[tid];
  EXPECT_EQ(ends, (std::map<std::string, int>{{"result", 31}, {"its worker died", 1}, {"timed out", 1}}));
  // Every child, the pool's workers among them: the one a task killed by its signal, the one
  // the process ran in with its code.
  EXPECT_EQ(processes.size(), run.processes);
  EXPECT_EQ(std::count_if(processes.begin(), processes.end(),
                          [](auto& p) { return p.first.starts_with("Process-") && p.second == "exit code 3"; }),
            1);
  EXPECT_EQ(std::count_if(processes.begin(), processes.end(), [](auto& p) { return p.second == "signal 9"; }), 2)
      << "the worker the task killed, and the one killed for the timeout; the others were closed and joined";
  for (auto& [tid, list] : spans) {
    ASSERT_TRUE(tracks.contains(tid)) << "a span on a track with no worker's name";
    EXPECT_TRUE(tracks[tid].starts_with("PoolWorker-")) << tracks[tid];
    std::sort(list.begin(), list.end());
    for (std::size_t i = 1; i < list.size(); ++i) EXPECT_LE(list[i - 1].second, list[i].first + 1e-3) << tracks[tid];
  }
  EXPECT_EQ(std::count_if(marks.begin(), marks.end(), [](auto& m) { return m.starts_with("died: signal 9"); }), 1) << text;
  EXPECT_EQ(std::count_if(marks.begin(), marks.end(), [](auto& m) { return m.ends_with("timed out"); }), 1) << text;
}

namespace {
void reduce_three_times(fiber::ring_member& me) {
  std::vector<double> v(1000, me.rank() + 1.0);
  for (int i = 0; i < 3; ++i) me.allreduce(std::span<double>(v));
  me.barrier();
}
}  // namespace
FIBER_REMOTE(reduce_three_times);

// A ring's collectives are in the run's recording, recorded by each member (sent up with its
// records) and traced as a span per call on the member's track.
namespace {
/// A task's work: a millisecond of the cpu (not a sleep: the worker is busy with it).
int spin_a_millisecond(int x) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
  while (std::chrono::steady_clock::now() < until) {
  }
  return x;
}
}  // namespace
FIBER_REMOTE(spin_a_millisecond);

// Each result says how long its task ran on its worker (result_aux), and the master records it
// with the task's end: a task's span on its worker's track begins no earlier than its end less
// that, and lies between its sending and its end; one worker's spans follow one another.
TEST(flight_recorder, a_tasks_span_is_timed_by_what_its_worker_said) {
  record_folder dir("timed");
  auto cfg = dir.cfg();
  {
    fiber::context ctx(cfg);
    fiber::pool p(ctx, fiber::pool_options{.processes = 2, .prefetch = 3});
    std::vector<int> xs(40);
    std::iota(xs.begin(), xs.end(), 1);
    EXPECT_EQ(p.map(&spin_a_millisecond, xs, 1).get().size(), 40u);
  }
  auto runs = fiber::run_history(cfg);
  ASSERT_EQ(runs.size(), 1u);
  // Each task's sending, its end and how long it ran, as the master recorded them, by task id.
  struct seen_task {
    std::uint64_t sent = 0, done = 0, ran = 0;
  };
  std::map<std::uint64_t, seen_task> seen;
  for (auto& [r, text] : read_flight_file(runs[0].path)) {
    if (r.kind == record_kind::task_sent) seen[r.c].sent = r.ns;
    if (r.kind == record_kind::task_done) seen[r.c].done = r.ns, seen[r.c].ran = r.d;
  }
  ASSERT_EQ(seen.size(), 40u);
  for (auto& [task, t] : seen) {
    EXPECT_GE(t.ran, 1'000'000u) << "task " << task << ": its worker spun a millisecond in it";
    EXPECT_LE(t.sent + t.ran, t.done) << "task " << task << ": it ran between its sending and its end";
  }
  auto text = dir.last_trace(cfg);
  auto trace = boost::json::parse(text);
  std::map<std::int64_t, std::vector<std::pair<double, double>>> spans;  // by worker
  for (auto& e : trace.at("traceEvents").as_array()) {
    auto& o = e.as_object();
    if (o.at("ph") != "X" || o.at("name") != "task") continue;
    auto& args = o.at("args").as_object();
    auto& t = seen[static_cast<std::uint64_t>(args.at("task").as_int64())];
    auto from = o.at("ts").to_number<double>(), to = from + o.at("dur").to_number<double>();  // µs
    // What the worker said: the span's length, or, where its sending or the task before it cut
    // the span shorter, an argument of its own.
    if (auto* ran = args.if_contains("ran_us"))
      EXPECT_EQ(static_cast<std::uint64_t>(ran->as_int64()), t.ran / 1000);
    else
      EXPECT_NEAR(to - from, static_cast<double>(t.ran) / 1000, 2e-3);
    EXPECT_GE(from, static_cast<double>(t.done - t.ran) / 1000 - 1e-3);
    EXPECT_NEAR(to, static_cast<double>(t.done) / 1000, 2e-3);
    spans[o.at("tid").as_int64()].emplace_back(from, to);
  }
  std::size_t traced = 0;
  for (auto& [tid, list] : spans) {
    traced += list.size();
    std::sort(list.begin(), list.end());
    for (std::size_t i = 1; i < list.size(); ++i) EXPECT_LE(list[i - 1].second, list[i].first + 1e-3);
  }
  EXPECT_EQ(traced, 40u) << text.substr(0, 2000);
}

TEST(flight_recorder, a_rings_collectives_are_recorded_by_its_members_and_traced) {
  record_folder dir("ring");
  auto cfg = dir.cfg();
  std::vector<int> pids;
  {
    fiber::context ctx(cfg);
    fiber::ring r(ctx, 2, &reduce_three_times);
    r.start().get();
    r.join().get();
    for (auto& code : r.exitcodes()) ASSERT_EQ(code, 0);
  }
  auto text = dir.last_trace(cfg);
  auto trace = boost::json::parse(text);
  std::map<std::int64_t, std::string> members;  // tid -> its name
  std::map<std::int64_t, std::vector<std::string>> calls;
  std::int64_t collectives_pid = -1;
  for (auto& e : trace.at("traceEvents").as_array()) {
    auto& o = e.as_object();
    if (o.at("ph") == "M" && o.at("name") == "process_name" && o.at("args").at("name") == "collectives")
      collectives_pid = o.at("pid").as_int64();
  }
  ASSERT_NE(collectives_pid, -1) << text.substr(0, 2000);
  for (auto& e : trace.at("traceEvents").as_array()) {
    auto& o = e.as_object();
    if (o.at("pid").as_int64() != collectives_pid) continue;
    if (o.at("ph") == "M" && o.at("name") == "thread_name")
      members[o.at("tid").as_int64()] = std::string(o.at("args").at("name").as_string());
    if (o.at("ph") == "X") {
      calls[o.at("tid").as_int64()].emplace_back(o.at("name").as_string());
      if (o.at("name") == "allreduce") EXPECT_EQ(o.at("args").at("bytes").as_int64(), 8000);
    }
  }
  ASSERT_EQ(calls.size(), 2u) << text.substr(0, 2000);
  for (auto& [tid, names] : calls) {
    EXPECT_EQ(names, (std::vector<std::string>{"allreduce", "allreduce", "allreduce", "barrier"}));
    EXPECT_TRUE(members[tid].starts_with("Ring-")) << members[tid];
  }
}

namespace {
void hold_64_mib() {
  std::vector<char> big(64 << 20);
  std::memset(big.data(), 1, big.size());  // touched: resident
  // Its address escapes: a compiler may otherwise drop the allocation and the writes (Clang does).
  asm volatile("" : : "g"(big.data()) : "memory");
}
}  // namespace
FIBER_REMOTE(hold_64_mib);

// Each process records its memory (and once at its end, with its peak); the trace shows it as a
// counter per process.
TEST(flight_recorder, each_process_records_its_memory_and_the_trace_shows_it) {
  record_folder dir("memory");
  auto cfg = dir.cfg({{"record_memory_ms", "0"}});  // at the end only: what the test can count on
  auto child = run_in_a_child(cfg, &hold_64_mib);
  auto text = dir.last_trace(cfg);
  auto trace = boost::json::parse(text);
  std::map<std::string, double> peak;  // by process
  for (auto& e : trace.at("traceEvents").as_array()) {
    auto& o = e.as_object();
    if (o.at("ph") != "C" || o.at("name") == "tasks") continue;
    auto& args = o.at("args").as_object();
    if (auto* resident = args.if_contains("resident MB")) EXPECT_GT(resident->to_number<double>(), 0.0);
    if (auto* at_peak = args.if_contains("peak MB")) peak[std::string(o.at("name").as_string())] = at_peak->to_number<double>();
  }
  ASSERT_TRUE(peak.contains(child)) << text.substr(0, 2000);
  EXPECT_GE(peak[child], 64 * 1.048576);  // 64 MiB, in MB
  EXPECT_TRUE(peak.contains("master")) << text.substr(0, 2000);
}

namespace {
class tally {
 public:
  int add(int k) { return n_ += k; }
  int fail(std::string why) { throw std::invalid_argument(why); }

 private:
  int n_ = 0;
};
}  // namespace
FIBER_REMOTE_CLASS(tally, add, fail);

/// The trace's spans on the `manager calls` track: (name, calls it stands for).
std::vector<std::pair<std::string, std::int64_t>> manager_spans(const boost::json::value& trace) {
  std::int64_t managers_pid = -1;
  for (auto& e : trace.at("traceEvents").as_array()) {
    auto& o = e.as_object();
    if (o.at("ph") == "M" && o.at("name") == "process_name" && o.at("args").at("name") == "manager calls")
      managers_pid = o.at("pid").as_int64();
  }
  std::vector<std::pair<std::string, std::int64_t>> out;
  for (auto& e : trace.at("traceEvents").as_array()) {
    auto& o = e.as_object();
    if (o.at("pid").as_int64() == managers_pid && o.at("ph") == "X")
      out.emplace_back(std::string(o.at("name").as_string()), o.at("args").at("calls").as_int64());
  }
  return out;
}

using manager_span = std::pair<std::string, std::int64_t>;

/// Calls a manager's objects 15 times, one call raising, in a run whose managers record 1 in
/// `every` calls; the trace's manager spans.
std::vector<manager_span> spans_of_15_manager_calls(const char* folder, const char* every) {
  record_folder dir(folder);
  auto cfg = dir.cfg({{"record_manager_calls", every}});
  {
    fiber::context ctx(cfg);
    fiber::manager mgr(ctx);
    auto t = mgr.create<tally>().get();
    for (int i = 1; i <= 10; ++i) EXPECT_EQ(t.add(1).get(), i);
    EXPECT_THROW((void)t.fail("on purpose").get(), fiber::error);  // the 11th
    auto list = mgr.list<int>().get();
    for (int i = 0; i < 4; ++i) list.append(i).get();  // the 12th to the 15th
  }
  auto text = dir.last_trace(cfg);
  auto spans = manager_spans(boost::json::parse(text));
  if (spans.empty()) EXPECT_NE(text.find("traceEvents"), std::string::npos) << text.substr(0, 3000);
  return spans;
}

// A manager's server records 1 in record_manager_calls of the calls it serves, each standing for
// that many, and every call that raised; the trace shows them by class and method.
TEST(flight_recorder, a_managers_calls_are_sampled_and_each_that_raised_is_recorded) {
  // At 1 in 4: the 4th and the 8th add, the raised 11th, and the 12th (the list's first append).
  EXPECT_EQ(spans_of_15_manager_calls("manager", "4"),
            (std::vector<manager_span>{{"tally.add", 4}, {"tally.add", 4}, {"tally.fail raised", 1}, {"list_store.append", 4}}));
}

// Off (0), a manager records none of its calls, not even one that raised.
TEST(flight_recorder, a_manager_records_no_call_with_record_manager_calls_0) {
  EXPECT_TRUE(spans_of_15_manager_calls("manager-off", "0").empty());
}

namespace {
int one() { return 1; }
}  // namespace
FIBER_REMOTE(one);
FIBER_META(one, .cpu = 1, .memory_mb = 64);

// What a child asked for, and where its engine put it (the local backend: the cpu it pinned it
// to), recorded once it runs; the trace puts it on the process's span.
TEST(flight_recorder, a_childs_resources_and_placement_are_recorded_and_traced) {
  record_folder dir("resources");
  auto cfg = dir.cfg();
  auto child = run_in_a_child(cfg, &one);
  auto runs = fiber::run_history(cfg);
  ASSERT_EQ(runs.size(), 1u);
  std::string placement;
  int resources_records = 0;
  for (auto& [r, text] : read_flight_file(runs.front().path)) {
    if (r.kind != record_kind::resources) continue;
    ++resources_records;
    EXPECT_EQ(r.c, 1u);  // cpus
    EXPECT_EQ(fiber::detail::memory_mb_of(r.d), 64u);
    EXPECT_EQ(fiber::detail::gpus_of(r.d), 0u);
    placement = text;
  }
  ASSERT_EQ(resources_records, 1);
  // A child that declared its cpus is pinned to that many of this host's.
  ASSERT_TRUE(placement.starts_with("cpus ")) << placement;
  EXPECT_EQ(placement.find(','), std::string::npos) << placement;

  auto text = dir.last_trace(cfg);
  auto trace = boost::json::parse(text);
  std::string traced;
  for (auto& e : trace.at("traceEvents").as_array()) {
    auto& o = e.as_object();
    if (o.at("ph") == "X" && o.at("pid").as_int64() == ::getpid() && o.at("name").as_string() == child)
      traced = std::string(o.at("args").at("resources").as_string());
  }
  EXPECT_EQ(traced, "cpu 1, 64 MB; " + placement) << text.substr(0, 3000);
}
