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
#include <set>
#include <unordered_map>

#include "core/flight_recorder.hpp"
#include "fiber/error.hpp"

namespace fiber {

namespace fs = std::filesystem;
using detail::record_kind;

namespace {

recorded_run summarize(const std::string& path, const std::vector<detail::read_record>& records) {
  recorded_run run;
  run.path = path;
  // <UTC start>-<id>.fiberrec
  auto stem = fs::path(path).filename().string();
  stem.resize(stem.size() - std::min(stem.size(), detail::flight_suffix.size()));
  auto dash = stem.find('-');
  run.id = dash == std::string::npos ? stem : stem.substr(dash + 1);
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
      case record_kind::worker_down: run.workers_lost += r.d ? 1 : 0; break;
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
    auto name = fs::path(f).filename().string();
    auto dash = name.find('-');
    if (dash != std::string::npos && name.compare(dash + 1, run.size(), run) == 0) matches.push_back(f);
  }
  if (matches.size() == 1) return matches.front();
  if (matches.empty())
    throw error(errc::config_error, "no recorded run matches '" + run + "' in " + detail::record_folder(cfg) +
                                        " (fiber history lists them; record_dir is where runs are recorded)");
  throw error(errc::config_error, "'" + run + "' matches " + std::to_string(matches.size()) +
                                      " recorded runs: give more of the id (fiber history lists them)");
}

std::string json_text(std::string_view s) { return boost::json::serialize(boost::json::string(s)); }

/// Chrome's trace event format, one event a line, times in µs.
class trace_writer {
 public:
  explicit trace_writer(const std::string& path) : out_(path) {
    if (!out_) throw error(errc::config_error, "cannot write the trace to " + path);
    out_ << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  }
  void meta(const char* what, int pid, std::uint32_t tid, std::string_view name) {
    line() << "{\"ph\":\"M\",\"name\":\"" << what << "\",\"pid\":" << pid << ",\"tid\":" << tid
           << ",\"args\":{\"name\":" << json_text(name) << "}}";
  }
  void span(int pid, std::uint32_t tid, std::string_view name, std::uint64_t from_ns, std::uint64_t to_ns,
            std::string_view args) {
    line() << "{\"ph\":\"X\",\"name\":" << json_text(name) << ",\"pid\":" << pid << ",\"tid\":" << tid
           << ",\"ts\":" << us(from_ns) << ",\"dur\":" << us(to_ns - from_ns) << ",\"args\":{" << args << "}}";
  }
  /// An arrow from (pid, 0) at `from_ns` to the span on `tid` that encloses `to_ns`.
  void flow(std::uint64_t id, int pid, std::uint64_t from_ns, std::uint32_t tid, std::uint64_t to_ns) {
    line() << "{\"ph\":\"s\",\"id\":" << id << ",\"name\":\"map\",\"cat\":\"map\",\"pid\":" << pid
           << ",\"tid\":0,\"ts\":" << us(from_ns) << "}";
    line() << "{\"ph\":\"f\",\"bp\":\"e\",\"id\":" << id << ",\"name\":\"map\",\"cat\":\"map\",\"pid\":" << pid
           << ",\"tid\":" << tid << ",\"ts\":" << us(to_ns) << "}";
  }
  void counter(int pid, std::string_view name, std::uint64_t ns, std::string_view args) {
    line() << "{\"ph\":\"C\",\"name\":" << json_text(name) << ",\"pid\":" << pid << ",\"ts\":" << us(ns)
           << ",\"args\":{" << args << "}}";
  }
  void mark(int pid, std::uint32_t tid, std::string_view name, std::uint64_t ns, std::string_view args) {
    line() << "{\"ph\":\"i\",\"s\":\"t\",\"name\":" << json_text(name) << ",\"pid\":" << pid << ",\"tid\":" << tid
           << ",\"ts\":" << us(ns) << ",\"args\":{" << args << "}}";
  }
  void close() {
    out_ << "\n]}\n";
    out_.close();
    if (!out_) throw error(errc::config_error, "the trace could not be written in full");
  }

 private:
  std::ofstream& line() {
    if (!first_) out_ << ",\n";
    first_ = false;
    return out_;
  }
  static std::string us(std::uint64_t ns) {
    auto s = std::to_string(ns / 1000) + "." + std::to_string(ns % 1000 + 1000).substr(1);
    return s;
  }
  std::ofstream out_;
  bool first_ = true;
};

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

recorded_run write_trace(const std::string& run, const std::string& out_path, const config& cfg) {
  auto path = find_recording(run, cfg);
  auto records = detail::read_flight_file(path);
  auto summary = summarize(path, records);
  trace_writer out(out_path);
  std::unordered_map<std::uint32_t, std::string> names;
  std::map<std::uint64_t, int> pools;  // pool id -> the trace's process number
  auto pool_pid = [&](std::uint64_t id) {
    auto [it, added] = pools.try_emplace(id, static_cast<int>(pools.size() + 1));
    if (added) {
      out.meta("process_name", it->second, 0, "pool " + std::to_string(it->second));
      out.meta("thread_name", it->second, 0, "master");
    }
    return it->second;
  };
  struct sent {
    std::uint64_t task, ns, items, map;
  };
  std::map<std::pair<int, std::uint64_t>, std::uint64_t> map_at;  // (pool, map) -> when it was submitted
  std::unordered_map<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>> process_began;  // child -> (ns, pid)
  std::unordered_map<std::uint32_t, std::string> process_resources;  // child -> its resources, in words
  bool processes_named = false, collectives_named = false, memory_named = false, managers_named = false;
  std::set<std::uint32_t> members_named, servers_named;
  std::uint64_t flows = 0;
  std::map<std::pair<int, std::uint32_t>, std::deque<sent>> held;  // per worker, in the order sent
  std::map<std::pair<int, std::uint32_t>, std::uint64_t> free_since;
  auto end_task = [&](const detail::flight_record& r, const char* how) {
    int pid = pool_pid(r.b);
    auto key = std::make_pair(pid, r.a);
    auto& q = held[key];
    auto it = std::find_if(q.begin(), q.end(), [&](const sent& s) { return s.task == r.c; });
    if (it == q.end()) return;
    // It ends when its end reached the master. It began when it was sent or when the one before
    // it on that worker ended (a worker runs its tasks in the order sent), whichever came later;
    // and, where its worker said how long it ran (a result's), not before its end less that.
    bool said = r.kind == record_kind::task_done;
    auto from = std::max(it->ns, free_since[key]);
    if (said && r.ns > r.d) from = std::max(from, r.ns - r.d);
    out.span(pid, r.a, "task " + std::to_string(r.c), from, std::max(from, r.ns),
             "\"task\":" + std::to_string(r.c) + ",\"map\":" + std::to_string(it->map) + ",\"items\":" +
                 std::to_string(it->items) + ",\"end\":\"" + how + "\"" +
                 (said ? ",\"ran_us\":" + std::to_string(r.d / 1000) : std::string()));
    // From the map's submission to the task's span: which map each task served.
    if (auto m = map_at.find({pid, it->map}); m != map_at.end()) out.flow(++flows, pid, m->second, r.a, from);
    free_since[key] = std::max(from, r.ns);
    q.erase(it);
  };
  for (auto& [r, text] : records) {
    switch (r.kind) {
      case record_kind::name: names[r.a] = text; break;
      case record_kind::pool_begin:
        // A pool of a child that is a master of its own says which one.
        if (!text.empty()) out.meta("process_name", pool_pid(r.b), 0, "pool " + std::to_string(pool_pid(r.b)) + " in " + text);
        out.mark(pool_pid(r.b), 0, "pool of " + std::to_string(r.a) + " workers", r.ns, "");
        break;
      case record_kind::pool_end: out.mark(pool_pid(r.b), 0, "pool ended", r.ns, ""); break;
      case record_kind::map_begin:
        map_at[{pool_pid(r.b), r.c}] = r.ns;
        out.mark(pool_pid(r.b), 0, "map " + std::to_string(r.c), r.ns,
                 "\"submission\":" + std::to_string(r.c) + ",\"items\":" + std::to_string(r.d));
        break;
      case record_kind::worker_up: {
        int pid = pool_pid(r.b);
        out.meta("thread_name", pid, r.a, names[r.a]);
        out.mark(pid, r.a, "started", r.ns, "\"pid\":" + std::to_string(r.c));
        break;
      }
      case record_kind::worker_down:
        out.mark(pool_pid(r.b), r.a, r.d ? "died: " + text : "ended", r.ns,
                 "\"how\":" + json_text(text) + ",\"code\":" + std::to_string(static_cast<std::int64_t>(r.c)));
        break;
      case record_kind::task_sent:
        held[{pool_pid(r.b), r.a}].push_back({r.c, r.ns, detail::items_of_task(r.d), detail::map_of_task(r.d)});
        break;
      case record_kind::task_done: end_task(r, "result"); break;
      case record_kind::task_lost: end_task(r, "its worker died"); break;
      case record_kind::task_timed_out:
        end_task(r, "timed out");
        out.mark(pool_pid(r.b), r.a, "task " + std::to_string(r.c) + " timed out", r.ns, "");
        break;
      case record_kind::truncated: out.mark(1, 0, "recording truncated (record_max_bytes)", r.ns, ""); break;
      case record_kind::collective: {
        // The rings' members, each a track of a `collectives` process, a span per call.
        constexpr int collectives_pid = 1 << 30;
        if (!collectives_named) out.meta("process_name", collectives_pid, 0, "collectives");
        collectives_named = true;
        if (members_named.insert(r.a).second) out.meta("thread_name", collectives_pid, r.a, names[r.a]);
        out.span(collectives_pid, r.a, text, r.ns, r.ns + r.d, "\"bytes\":" + std::to_string(r.c));
        break;
      }
      case record_kind::memory: {
        // Each process's memory, a counter track of a `memory` process (MB).
        constexpr int memory_pid = (1 << 30) + 1;
        if (!memory_named) out.meta("process_name", memory_pid, 0, "memory");
        memory_named = true;
        char mb[96];
        std::snprintf(mb, sizeof mb, "\"resident_MB\":%.1f,\"peak_MB\":%.1f", static_cast<double>(r.c) / 1e6,
                      static_cast<double>(r.d) / 1e6);
        out.counter(memory_pid, names[r.a], r.ns, mb);
        break;
      }
      case record_kind::process_pending:
        // On the process's track, where its span begins once it runs.
        if (!processes_named) out.meta("process_name", 0, 0, "processes");
        processes_named = true;
        out.meta("thread_name", 0, r.a, names[r.a]);
        out.mark(0, r.a, "pending: " + text, r.ns, "\"reason\":" + json_text(text));
        break;
      case record_kind::process_start: process_began[r.a] = {r.ns, r.c}; break;
      case record_kind::resources: process_resources[r.a] = detail::resources_text(r.c, r.d, text); break;
      case record_kind::manager_call: {
        // Each manager's server a track of a `manager calls` process, a span per recorded call.
        constexpr int managers_pid = (1 << 30) + 2;
        if (!managers_named) out.meta("process_name", managers_pid, 0, "manager calls");
        managers_named = true;
        if (servers_named.insert(r.a).second) out.meta("thread_name", managers_pid, r.a, names[r.a]);
        out.span(managers_pid, r.a, text, r.ns, r.ns + r.d,
                 "\"object\":" + std::to_string(r.c) + ",\"calls\":" + std::to_string(r.b));
        break;
      }
      case record_kind::process_end: {
        // The master's children, pool workers included, each a track of process 0.
        auto began = process_began.find(r.a);
        if (began == process_began.end()) break;
        if (!processes_named) out.meta("process_name", 0, 0, "processes");
        processes_named = true;
        out.meta("thread_name", 0, r.a, names[r.a]);
        auto code = static_cast<std::int64_t>(r.c);
        auto how = detail::exit_text(code);
        if (r.d == 2) how = text + " (" + how + ")";  // fiber ended it, and says why
        out.span(0, r.a, names[r.a], began->second.first, std::max(began->second.first, r.ns),
                 "\"pid\":" + std::to_string(began->second.second) + ",\"end\":" + json_text(how) +
                     (r.d == 1 ? ",\"raised\":" + json_text(text) : std::string()) +
                     (process_resources.count(r.a) ? ",\"resources\":" + json_text(process_resources[r.a]) : std::string()));
        process_began.erase(began);
        process_resources.erase(r.a);
        break;
      }
      default: break;
    }
  }
  out.close();
  return summary;
}

}  // namespace fiber
