// Recorded runs (fiber/history.hpp): their summaries, and a run as a Chrome trace.
#include "fiber/history.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

#include "core/flight_recorder.hpp"
#include "core/trace_builder.hpp"
#include "core/chrome_trace_writer.hpp"
#include "core/history_page.hpp"
#include "core/recording_folder.hpp"
#include "core/perfetto_trace_writer.hpp"
#include "fiber/error.hpp"

namespace fiber {

namespace fs = std::filesystem;
using detail::record_kind;

namespace {

recorded_run summarize(const std::string& path, const std::vector<detail::read_record>& records) {
  recorded_run run;
  run.path = path;
  if (auto name = detail::parse_recording_name(fs::path(path).filename().string())) run.id = name->id;
  for (auto& [r, text] : records) {
    switch (r.kind) {
      case record_kind::run_begin: {
        run.began = std::chrono::system_clock::time_point(
            std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(r.b)));
        auto tab = text.find('\t');
        run.program = text.substr(0, tab);
        if (tab != std::string::npos) run.backend = text.substr(tab + 1);
        break;
      }
      case record_kind::run_end: run.ended = true; break;
      case record_kind::pool_begin: ++run.pools; break;
      case record_kind::map_begin: ++run.maps; break;
      case record_kind::worker_up: ++run.workers_started; break;
      case record_kind::worker_down:
        run.workers_lost += (r.d & 1) ? 1 : 0;
        run.workers_memory_exceeded += (r.d & 2) ? 1 : 0;
        break;
      case record_kind::task_sent: ++run.tasks_sent; break;
      case record_kind::task_done: ++run.tasks_done; break;
      case record_kind::task_lost: ++run.tasks_lost; break;
      case record_kind::task_timed_out: ++run.tasks_timed_out; break;
      case record_kind::truncated: run.truncated = true; break;
      case record_kind::process_start: ++run.processes; break;
      default: break;
    }
    run.seconds = std::max(run.seconds, static_cast<double>(r.ns) / 1e9);
  }
  return run;
}

std::vector<std::string> recordings(const config& cfg) {
  std::vector<std::string> files;
  std::error_code ec;
  for (auto it = fs::directory_iterator(detail::record_folder(cfg), ec); !ec && it != fs::directory_iterator();
       it.increment(ec))
    if (it->path().filename().string().ends_with(detail::flight_suffix)) files.push_back(it->path().string());
  std::sort(files.rbegin(), files.rend());  // newest first: the names begin with the UTC start
  return files;
}

std::string find_recording(const std::string& run, const config& cfg) {
  if (run.find('/') != std::string::npos || run.ends_with(detail::flight_suffix)) return run;
  auto files = recordings(cfg);
  if (run == "last" && !files.empty()) return files.front();
  std::vector<std::string> matches;
  for (auto& f : files) {
    auto name = detail::parse_recording_name(fs::path(f).filename().string());
    if (name && name->id.starts_with(run)) matches.push_back(f);
  }
  if (matches.size() == 1) return matches.front();
  if (matches.empty())
    throw error(errc::config_error, "no recorded run matches '" + run + "' in " + detail::record_folder(cfg) +
                                        " (fiber history lists them; record_dir is where runs are recorded)");
  throw error(errc::config_error, "'" + run + "' matches " + std::to_string(matches.size()) +
                                      " recorded runs: give more of the id (fiber history lists them)");
}

}  // namespace

std::vector<recorded_run> run_history(const config& cfg) {
  std::vector<recorded_run> runs;
  for (auto& f : recordings(cfg)) {
    try {
      runs.push_back(summarize(f, detail::read_flight_file(f)));
    } catch (const error&) {
      // Not a recording (or unreadable): not a run to list.
    }
  }
  return runs;
}

recorded_run write_trace(const std::string& run, const std::string& out_path, trace_format format, const config& cfg) {
  auto path = find_recording(run, cfg);
  auto records = detail::read_flight_file(path);
  auto summary = summarize(path, records);
  std::unique_ptr<detail::trace_sink> out;
  if (format == trace_format::perfetto) out = std::make_unique<detail::perfetto_trace_writer>(out_path);
  else out = std::make_unique<detail::chrome_trace_writer>(out_path);
  detail::trace_builder trace(*out);
  for (auto& [r, text] : records) trace.add(r, text);
  trace.finish();
  out->close();
  return summary;
}

recorded_run write_trace(const std::string& run, const std::string& out_path, const config& cfg) {
  return write_trace(run, out_path, trace_format::chrome_json, cfg);
}

recorded_run write_history_page(const std::string& run, const std::string& out_path, const config& cfg) {
  auto path = find_recording(run, cfg);
  auto records = detail::read_flight_file(path);
  auto summary = summarize(path, records);
  std::ofstream out(out_path);
  out << detail::history_page(summary, records);
  out.close();
  if (!out) throw error(errc::config_error, "cannot write the page to " + out_path);
  return summary;
}

}  // namespace fiber
