#include "core/trace_builder.hpp"

#include <algorithm>
#include <cstdio>

namespace fiber::detail {

namespace {
// The runs' own processes in the trace, above any pool's number.
constexpr int collectives_pid = 1 << 30, memory_pid = (1 << 30) + 1, managers_pid = (1 << 30) + 2;
}  // namespace

void trace_builder::add(const flight_record& r, const std::string& text) {
  switch (r.kind) {
    case record_kind::name: names_[r.a] = text; break;
    case record_kind::pool_begin:
    case record_kind::pool_end:
    case record_kind::map_begin:
    case record_kind::worker_up:
    case record_kind::worker_down:
    case record_kind::task_sent:
    case record_kind::task_done:
    case record_kind::task_lost:
    case record_kind::task_timed_out: pool_event(r, text); break;
    case record_kind::process_pending:
    case record_kind::process_start:
    case record_kind::resources:
    case record_kind::process_end: process_event(r, text); break;
    case record_kind::collective:
    case record_kind::memory:
    case record_kind::manager_call: track_event(r, text); break;
    case record_kind::truncated: out_.mark(1, 0, "recording truncated (record_max_bytes)", r.ns, ""); break;
    default: break;
  }
}

int trace_builder::pool_pid(std::uint64_t id) {
  auto [it, added] = pools_.try_emplace(id, static_cast<int>(pools_.size() + 1));
  if (added) {
    out_.meta("process_name", it->second, 0, "pool " + std::to_string(it->second));
    out_.meta("thread_name", it->second, 0, "master");
  }
  return it->second;
}

void trace_builder::pool_event(const flight_record& r, const std::string& text) {
  switch (r.kind) {
    case record_kind::pool_begin:
      // A pool of a child that is a master of its own says which one.
      if (!text.empty()) out_.meta("process_name", pool_pid(r.b), 0, "pool " + std::to_string(pool_pid(r.b)) + " in " + text);
      out_.mark(pool_pid(r.b), 0, "pool of " + std::to_string(r.a) + " workers", r.ns, "");
      break;
    case record_kind::pool_end: out_.mark(pool_pid(r.b), 0, "pool ended", r.ns, ""); break;
    case record_kind::map_begin:
      map_at_[{pool_pid(r.b), r.c}] = r.ns;
      out_.mark(pool_pid(r.b), 0, "map " + std::to_string(r.c), r.ns,
                "\"submission\":" + std::to_string(r.c) + ",\"items\":" + std::to_string(r.d));
      break;
    case record_kind::worker_up: {
      int pid = pool_pid(r.b);
      out_.meta("thread_name", pid, r.a, names_[r.a]);
      out_.mark(pid, r.a, "started", r.ns, "\"pid\":" + std::to_string(r.c));
      break;
    }
    case record_kind::worker_down:
      out_.mark(pool_pid(r.b), r.a, r.d ? "died: " + text : "ended", r.ns,
                "\"how\":" + json_text(text) + ",\"code\":" + std::to_string(static_cast<std::int64_t>(r.c)));
      break;
    case record_kind::task_sent:
      held_[{pool_pid(r.b), r.a}].push_back({r.c, r.ns, items_of_task(r.d), map_of_task(r.d)});
      break;
    case record_kind::task_done: end_task(r, "result"); break;
    case record_kind::task_lost: end_task(r, "its worker died"); break;
    case record_kind::task_timed_out:
      end_task(r, "timed out");
      out_.mark(pool_pid(r.b), r.a, "task " + std::to_string(r.c) + " timed out", r.ns, "");
      break;
    default: break;
  }
}

void trace_builder::end_task(const flight_record& r, const char* how) {
  int pid = pool_pid(r.b);
  auto key = std::make_pair(pid, r.a);
  auto& q = held_[key];
  auto it = std::find_if(q.begin(), q.end(), [&](const sent& s) { return s.task == r.c; });
  if (it == q.end()) return;
  // It ends when its end reached the master. It began when it was sent or when the one before
  // it on that worker ended (a worker runs its tasks in the order sent), whichever came later;
  // and, where its worker said how long it ran (a result's), not before its end less that.
  bool said = r.kind == record_kind::task_done;
  auto from = std::max(it->ns, free_since_[key]);
  if (said && r.ns > r.d) from = std::max(from, r.ns - r.d);
  out_.span(pid, r.a, "task " + std::to_string(r.c), from, std::max(from, r.ns),
            "\"task\":" + std::to_string(r.c) + ",\"map\":" + std::to_string(it->map) + ",\"items\":" +
                std::to_string(it->items) + ",\"end\":\"" + how + "\"" +
                (said ? ",\"ran_us\":" + std::to_string(r.d / 1000) : std::string()));
  // From the map's submission to the task's span: which map each task served.
  if (auto m = map_at_.find({pid, it->map}); m != map_at_.end()) out_.flow(++flows_, pid, m->second, r.a, from);
  free_since_[key] = std::max(from, r.ns);
  q.erase(it);
}

void trace_builder::name_processes_track(std::uint32_t tid) {
  if (!processes_named_) out_.meta("process_name", 0, 0, "processes");
  processes_named_ = true;
  out_.meta("thread_name", 0, tid, names_[tid]);
}

void trace_builder::process_event(const flight_record& r, const std::string& text) {
  switch (r.kind) {
    case record_kind::process_pending:
      // On the process's track, where its span begins once it runs.
      name_processes_track(r.a);
      out_.mark(0, r.a, "pending: " + text, r.ns, "\"reason\":" + json_text(text));
      break;
    case record_kind::process_start: process_began_[r.a] = {r.ns, r.c}; break;
    case record_kind::resources: process_resources_[r.a] = resources_text(r.c, r.d, text); break;
    case record_kind::process_end: {
      // The master's children, pool workers included, each a track of process 0.
      auto began = process_began_.find(r.a);
      if (began == process_began_.end()) break;
      name_processes_track(r.a);
      auto how = exit_text(static_cast<std::int64_t>(r.c));
      if (r.d == 2) how = text + " (" + how + ")";  // fiber ended it, and says why
      auto res = process_resources_.find(r.a);
      out_.span(0, r.a, names_[r.a], began->second.first, std::max(began->second.first, r.ns),
                "\"pid\":" + std::to_string(began->second.second) + ",\"end\":" + json_text(how) +
                    (r.d == 1 ? ",\"raised\":" + json_text(text) : std::string()) +
                    (res != process_resources_.end() ? ",\"resources\":" + json_text(res->second) : std::string()));
      process_began_.erase(began);
      if (res != process_resources_.end()) process_resources_.erase(res);
      break;
    }
    default: break;
  }
}

void trace_builder::own_track(int pid, const char* process, std::uint32_t tid) {
  if (own_named_.insert(pid).second) out_.meta("process_name", pid, 0, process);
  if (own_tracks_.insert({pid, tid}).second) out_.meta("thread_name", pid, tid, names_[tid]);
}

void trace_builder::track_event(const flight_record& r, const std::string& text) {
  switch (r.kind) {
    case record_kind::collective:
      // The rings' members, each a track of a `collectives` process, a span per call.
      own_track(collectives_pid, "collectives", r.a);
      out_.span(collectives_pid, r.a, text, r.ns, r.ns + r.d, "\"bytes\":" + std::to_string(r.c));
      break;
    case record_kind::memory: {
      // Each process's memory, a counter track of a `memory` process (MB).
      if (own_named_.insert(memory_pid).second) out_.meta("process_name", memory_pid, 0, "memory");
      char mb[96];
      std::snprintf(mb, sizeof mb, "\"resident_MB\":%.1f,\"peak_MB\":%.1f", static_cast<double>(r.c) / 1e6,
                    static_cast<double>(r.d) / 1e6);
      out_.counter(memory_pid, names_[r.a], r.ns, mb);
      break;
    }
    case record_kind::manager_call:
      // Each manager's server a track of a `manager calls` process, a span per recorded call.
      own_track(managers_pid, "manager calls", r.a);
      out_.span(managers_pid, r.a, text, r.ns, r.ns + r.d,
                "\"object\":" + std::to_string(r.c) + ",\"calls\":" + std::to_string(r.b));
      break;
    default: break;
  }
}

}  // namespace fiber::detail
