// A large run's trace in both of fiber's formats, opened in Perfetto's own UI in headless
// Chromium (tests/perfetto_ui.hpp): each format's size per task, the time to write it, the time
// the UI takes to load it and go idle, the browser's peak memory (the sum of its processes' peak
// resident sizes), and what the UI counted (task slices, error stats). The formats alternate:
// JSON, native, native, JSON.
//   build/bench/trace_load_bench [TASKS] [WORKERS]     (default 1000000 64)
// Needs /usr/bin/chromium and the UI (scripts/perfetto_ui.sh).
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

/// A recording of `tasks` tasks of one map on `workers` workers, made through the recorder.
std::string record(const fiber::config& cfg, std::uint64_t tasks, std::uint32_t workers) {
  fiber::detail::flight_recorder rec;
  rec.open(cfg, "trace-load");
  std::vector<std::uint32_t> names;
  rec.record(record_kind::pool_begin, workers, 1);
  for (std::uint32_t w = 1; w <= workers; ++w) {
    names.push_back(rec.name("PoolWorker-1-" + std::to_string(w)));
    rec.record(record_kind::worker_up, names.back(), 1, 1000 + w);
  }
  rec.record(record_kind::map_begin, 0, 1, 1, tasks);
  for (std::uint64_t t = 1; t <= tasks; ++t) {
    auto w = names[t % names.size()];
    rec.record(record_kind::task_sent, w, 1, t, fiber::detail::task_sent_items(1, 1));
    rec.record(record_kind::task_done, w, 1, t, 500);
  }
  rec.record(record_kind::map_end, 0, 1, 1);
  for (auto w : names) rec.record(record_kind::worker_down, w, 1, 0, 0);
  rec.record(record_kind::pool_end, 0, 1);
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
