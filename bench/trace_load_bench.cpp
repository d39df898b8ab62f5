// A large run's trace in both of fiber's formats, opened in Perfetto's own UI in headless
// Chromium (tests/perfetto_ui.hpp): each format's size per task, the time to write it, the time
// the UI takes to load it and go idle, the browser's peak memory (the sum of its processes' peak
// resident sizes), and what the UI counted (task slices, error stats). The formats alternate:
// JSON, native, native, JSON.
//   build/bench/trace_load_bench [TASKS] [WORKERS]     (default 1000000 64)
// Needs /usr/bin/chromium and the UI (scripts/perfetto_ui.sh). TRACE_LOAD_KEEP=DIR keeps the traces there.
#include <fiber/fiber.hpp>
#include <fiber/history.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/flight_recorder.hpp"
#include "perfetto_ui.hpp"

namespace {
namespace fs = std::filesystem;
using fiber::detail::record_kind;

/// A recording of `tasks` tasks of one map on `workers` workers, made through the recorder, timed
/// as such a run goes: 1 ms tasks, each worker holding the next one while it runs one (a million
/// tasks on 64 workers: 15.6 s of recorded time, so the times are as long as a real run's).
std::string record(const fiber::config& cfg, std::uint64_t tasks, std::uint32_t workers) {
  fiber::detail::flight_recorder rec;
  rec.open(cfg, "trace-load");
  constexpr std::uint64_t ms = 1'000'000, base = 10 * ms;
  std::vector<std::uint32_t> names;
  rec.record_at(base, record_kind::pool_begin, workers, 1, 0, 0, {});
  for (std::uint32_t w = 0; w < workers; ++w) {
    names.push_back(rec.name("PoolWorker-1-" + std::to_string(w + 1)));
    rec.record_at(base + w * 1000, record_kind::worker_up, names.back(), 1, 1000 + w, 0, {});
  }
  auto at = base + 2 * ms;
  rec.record_at(at, record_kind::map_begin, 0, 1, 1, tasks, {});
  auto rounds = (tasks + workers - 1) / workers;
  auto task_of = [&](std::uint64_t round, std::uint32_t w) { return round * workers + w + 1; };
  auto send = [&](std::uint64_t round, std::uint32_t w, std::uint64_t ns) {
    if (task_of(round, w) <= tasks)
      rec.record_at(ns, record_kind::task_sent, names[w], 1, task_of(round, w), fiber::detail::task_sent_items(1, 1), {});
  };
  for (std::uint32_t w = 0; w < workers; ++w) send(0, w, at + w * 10'000), send(1, w, at + w * 10'000 + 1000);
  for (std::uint64_t round = 1; round <= rounds; ++round)
    for (std::uint32_t w = 0; w < workers; ++w) {
      auto ns = at + round * ms + w * 10'000 + 30'000;
      if (task_of(round - 1, w) <= tasks)
        rec.record_at(ns, record_kind::task_done, names[w], 1, task_of(round - 1, w), ms, {});
      send(round + 1, w, ns + 1000);
    }
  auto end = at + (rounds + 1) * ms + workers * 10'000;
  rec.record_at(end, record_kind::map_end, 0, 1, 1, 0, {});
  for (auto w : names) rec.record_at(end + 1000, record_kind::worker_down, w, 1, 0, 0, {});
  rec.record_at(end + 2000, record_kind::pool_end, 0, 1, 0, 0, {});
  auto path = rec.path();
  rec.close();
  return path;
}

/// The sum of the peak resident sizes (VmHWM) of `root` and its descendants, in MB.
double tree_peak_mb(pid_t root) {
  std::vector<pid_t> tree{root};
  for (std::size_t i = 0; i < tree.size(); ++i) {
    std::ifstream children("/proc/" + std::to_string(tree[i]) + "/task/" + std::to_string(tree[i]) + "/children");
    for (pid_t c; children >> c;) tree.push_back(c);
  }
  double kb = 0;
  for (auto p : tree) {
    std::ifstream status("/proc/" + std::to_string(p) + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.starts_with("VmHWM:")) kb += std::stod(line.substr(6));
  }
  return kb / 1024;
}

void measure(const fs::path& recording, const fiber::config& cfg, fiber::trace_format format, std::uint64_t tasks,
             const fs::path& dir) {
  bool native = format == fiber::trace_format::perfetto;
  auto out = dir / (native ? "trace.perfetto-trace" : "trace.json");
  auto t0 = std::chrono::steady_clock::now();
  (void)fiber::write_trace(recording.string(), out.string(), format, cfg);
  double write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto bytes = fs::file_size(out);
  fiber_test::perfetto_trace ui(out, std::chrono::seconds(600));
  auto slices = ui.number("select count(*) from slice where name = 'task'");
  auto problems = ui.problems();
  std::printf("%-8s %9.1f MB %7.1f B/task  written %6.2f s  loaded in the UI %6.2f s  browser peak %7.0f MB  "
              "task slices %lld%s%s\n",
              native ? "perfetto" : "json", static_cast<double>(bytes) / 1e6,
              static_cast<double>(bytes) / static_cast<double>(tasks), write_s, ui.load_seconds(),
              tree_peak_mb(ui.page().pid()), static_cast<long long>(slices), problems.empty() ? "" : "  errors: ",
              problems.c_str());
  std::fflush(stdout);
  if (const char* keep = std::getenv("TRACE_LOAD_KEEP"); keep && *keep)
    fs::copy_file(out, fs::path(keep) / out.filename(), fs::copy_options::overwrite_existing);
  fs::remove(out);
}
}  // namespace

int main(int argc, char** argv) {
  std::uint64_t tasks = argc > 1 ? std::stoull(argv[1]) : 1000000;
  auto workers = static_cast<std::uint32_t>(argc > 2 ? std::stoul(argv[2]) : 64);
  if (fiber_test::chromium_path().empty() || fiber_test::perfetto_ui_path().empty()) {
    std::fprintf(stderr, "needs /usr/bin/chromium and Perfetto's UI (scripts/perfetto_ui.sh)\n");
    return 2;
  }
  auto dir = fs::temp_directory_path() / ("fiber-trace-load-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto cfg = fiber::config::load({{"record_dir", dir.string()}, {"record_max_bytes", "1000000000000"}});
  auto recording = record(cfg, tasks, workers);
  std::printf("%llu tasks on %u workers, recording %.1f MB\n", static_cast<unsigned long long>(tasks), workers,
              static_cast<double>(fs::file_size(recording)) / 1e6);
  for (auto f : {fiber::trace_format::chrome_json, fiber::trace_format::perfetto, fiber::trace_format::perfetto,
                 fiber::trace_format::chrome_json})
    measure(recording, cfg, f, tasks, dir);
  fs::remove_all(dir);
}
