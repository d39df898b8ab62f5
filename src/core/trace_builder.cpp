#include "core/trace_builder.hpp"

#include <algorithm>
#include <filesystem>

namespace fiber::detail {

namespace {
// The run's own groups, after every pool.
constexpr int program_group = 0, collectives_group = 1 << 30, managers_group = (1 << 30) + 1;
// A master's tracks beyond its first, for maps that overlap (a map_async beside a map).
constexpr std::uint32_t extra_lane = 1u << 31;
}  // namespace

void trace_builder::add(const flight_record& r, const std::string& text) {
  last_ns_ = std::max(last_ns_, r.ns);
  switch (r.kind) {
    case record_kind::name: names_[r.a] = text; break;
    case record_kind::run_begin:
    case record_kind::truncated: program_event(r, text); break;
    case record_kind::pool_begin:
    case record_kind::pool_end:
    case record_kind::worker_up:
    case record_kind::worker_down: pool_event(r, text); break;
    case record_kind::map_begin:
    case record_kind::map_end: map_event(r); break;
    case record_kind::task_sent:
    case record_kind::task_done:
    case record_kind::task_lost:
    case record_kind::task_timed_out: task_event(r); break;
    case record_kind::process_pending:
    case record_kind::process_start:
    case record_kind::resources:
    case record_kind::process_end: process_event(r, text); break;
    case record_kind::collective:
    case record_kind::memory:
    case record_kind::manager_call: track_event(r, text); break;
    default: break;
  }
}

void trace_builder::program_event(const flight_record& r, const std::string& text) {
  if (r.kind == record_kind::run_begin) {
    // The program by its name and pid, as a process list shows it.
    master_pid_ = r.a;
    began_ns_ = r.ns;
    auto program = std::filesystem::path(text.substr(0, text.find('\t'))).filename().string();
    out_.group(program_group, program.empty() ? "program" : program, master_pid_, 0);
    out_.track(program_group, 0, "master", master_pid_);
    program_named_ = true;
    return;
  }
  if (!program_named_) {
    out_.group(program_group, "program", 0, 0);
    out_.track(program_group, 0, "master", 0);
    program_named_ = true;
  }
  out_.mark(program_group, 0, "recording cut here (record_max_bytes): nothing after this was recorded", r.ns, {});
}

trace_builder::pool_state& trace_builder::pool(std::uint64_t id, const std::string& in) {
  auto [it, added] = pools_.try_emplace(id);
  if (added) {
    // Named once (Perfetto's format keeps a track's first name): a pool of a child that is a
    // master of its own says which one, from its first record.
    it->second.group = static_cast<int>(pools_.size());
    auto name = "pool " + std::to_string(it->second.group) + (in.empty() ? std::string() : " in " + in);
    out_.group(it->second.group, name, it->second.group, it->second.group);
    out_.track(it->second.group, 0, "master", master_pid_);
  }
  return it->second;
}

void trace_builder::pool_event(const flight_record& r, const std::string& text) {
  auto& p = pool(r.b, r.kind == record_kind::pool_begin ? text : std::string());
  switch (r.kind) {
    case record_kind::pool_begin:
      out_.mark(p.group, 0, "pool of " + std::to_string(r.a) + " workers", r.ns, {{"workers", std::int64_t(r.a)}});
      break;
    case record_kind::pool_end: out_.mark(p.group, 0, "pool ended", r.ns, {}); break;
    case record_kind::worker_up:
      pids_[r.a] = static_cast<std::int64_t>(r.c);
      if (tracks_named_.insert({p.group, r.a + 1}).second) out_.track(p.group, r.a + 1, names_[r.a], static_cast<std::int64_t>(r.c));
      out_.mark(p.group, r.a + 1, "started", r.ns, {{"pid", static_cast<std::int64_t>(r.c)}});
      break;
    case record_kind::worker_down:
      out_.mark(p.group, r.a + 1, r.d ? "died: " + text : "ended", r.ns,
                {{"how", std::string_view(text)}, {"code", static_cast<std::int64_t>(r.c)}});
      break;
    default: break;
  }
}

void trace_builder::map_event(const flight_record& r) {
  auto& p = pool(r.b);
  if (r.kind == record_kind::map_end) return end_map(p, r.c, r.ns);
  // The first of the master's tracks with no map on it now.
  std::uint32_t lane = 0;
  while (lane < p.lanes_busy.size() && p.lanes_busy[lane]) ++lane;
  if (lane == p.lanes_busy.size()) {
    p.lanes_busy.push_back(false);
    if (lane > 0) out_.track(p.group, extra_lane | lane, "master: maps beside the first", master_pid_);
  }
  p.lanes_busy[lane] = true;
  auto& m = p.maps[r.c] = {r.ns, r.d, lane};
  p.waiting.change(out_, p.group, m.waiting(), r.ns);
}

void trace_builder::end_map(pool_state& p, std::uint64_t map, std::uint64_t ns) {
  auto it = p.maps.find(map);
  if (it == p.maps.end()) return;
  auto lane = it->second.lane;
  out_.span(p.group, lane ? extra_lane | lane : 0, "map " + std::to_string(map), it->second.ns, std::max(ns, it->second.ns),
            {{"submission", static_cast<std::int64_t>(map)}, {"items", static_cast<std::int64_t>(it->second.items)}});
  p.lanes_busy[lane] = false;
  p.waiting.change(out_, p.group, -it->second.waiting(), ns);  // what it did not send, it never will
  p.maps.erase(it);
}

void trace_builder::task_event(const flight_record& r) {
  auto& p = pool(r.b);
  switch (r.kind) {
    case record_kind::task_sent: {
      // An arrow from its sending, on the track of its map (whose span holds the sending); begun
      // here, in the order the tasks were sent.
      std::uint64_t flow = 0;
      if (auto m = p.maps.find(map_of_task(r.d)); m != p.maps.end()) {
        flow = ++flows_;
        out_.flow_from(p.group, m->second.lane ? extra_lane | m->second.lane : 0, r.ns, flow);
      }
      auto items = items_of_task(r.d);
      held_[{p.group, r.a}].push_back({r.c, r.ns, items, map_of_task(r.d), flow});
      p.held.change(out_, p.group, 1, r.ns);
      on_map(p, map_of_task(r.d), r.ns, [&](open_map& m) { m.held += items; });
      break;
    }
    case record_kind::task_done: end_task(r, "result"); break;
    case record_kind::task_lost: end_task(r, "its worker died"); break;
    case record_kind::task_timed_out:
      end_task(r, "timed out");
      out_.mark(p.group, r.a + 1, "task " + std::to_string(r.c) + " timed out", r.ns, {});
      break;
    default: break;
  }
}

void trace_builder::end_task(const flight_record& r, const char* how) {
  auto& p = pool(r.b);
  auto key = std::make_pair(p.group, r.a);
  auto& q = held_[key];
  auto it = std::find_if(q.begin(), q.end(), [&](const sent& s) { return s.task == r.c; });
  if (it == q.end()) return;
  // It ends when its end reached the master. It began when it was sent or when the one before
  // it on that worker ended (a worker runs its tasks in the order sent), whichever came later;
  // and, where its worker said how long it ran (a result's), not before its end less that.
  bool said = r.kind == record_kind::task_done;
  p.held.change(out_, p.group, -1, r.ns);
  // A result's items are answered; a lost task's wait to be sent again.
  on_map(p, it->map, r.ns, [&](open_map& m) {
    m.held -= std::min(m.held, it->items);
    if (said) m.done += it->items;
  });
  auto from = std::max(it->ns, free_since_[key]);
  if (said && r.ns > r.d) from = std::max(from, r.ns - r.d);
  // What a reader would not assume is said: items other than one, an end other than a result,
  // and what the worker said it ran where the span is shorter than that (cut by its sending or
  // the task before it); a million tasks' trace is mostly these spans, and their map is where
  // the arrow comes from.
  trace_arg args[4] = {{"task", static_cast<std::int64_t>(r.c)}};
  std::size_t n = 1;
  if (it->items != 1) args[n++] = {"items", static_cast<std::int64_t>(it->items)};
  if (!said) args[n++] = {"end", how};
  else if (r.ns < r.d || from != r.ns - r.d) args[n++] = {"ran_us", static_cast<std::int64_t>(r.d / 1000)};
  out_.span(p.group, r.a + 1, "task", from, std::max(from, r.ns), {args, n}, it->flow);
  free_since_[key] = std::max(from, r.ns);
  q.erase(it);
}

template <class F>
void trace_builder::on_map(pool_state& p, std::uint64_t map, std::uint64_t ns, F f) {
  auto it = p.maps.find(map);
  if (it == p.maps.end()) return;
  auto before = it->second.waiting();
  f(it->second);
  p.waiting.change(out_, p.group, it->second.waiting() - before, ns);
}

std::uint32_t trace_builder::child_track(std::uint32_t child) {
  if (!program_named_) program_event(flight_record{}, {});
  if (tracks_named_.insert({program_group, child + 1}).second) {
    auto pid = pids_.find(child);
    out_.track(program_group, child + 1, names_[child], pid == pids_.end() ? 0 : pid->second);
  }
  return child + 1;
}

void trace_builder::process_event(const flight_record& r, const std::string& text) {
  switch (r.kind) {
    case record_kind::process_pending:
      // On the process's track, where its span begins once it runs.
      out_.mark(program_group, child_track(r.a), "pending: " + text, r.ns, {{"reason", std::string_view(text)}});
      break;
    case record_kind::process_start:
      process_began_[r.a] = {r.ns, r.c};
      if (r.c) pids_[r.a] = static_cast<std::int64_t>(r.c);
      break;
    case record_kind::resources: process_resources_[r.a] = resources_text(r.c, r.d, text); break;
    case record_kind::process_end: {
      // Each of the master's children, pool workers included, a track of the program.
      auto began = process_began_.find(r.a);
      if (began == process_began_.end()) break;
      auto how = exit_text(static_cast<std::int64_t>(r.c));
      if (r.d == 2) how = text + " (" + how + ")";  // fiber ended it, and says why
      auto res = process_resources_.find(r.a);
      std::string resources = res != process_resources_.end() ? res->second : std::string();
      auto track = child_track(r.a);
      auto pid = static_cast<std::int64_t>(began->second.second);
      auto from = began->second.first, to = std::max(began->second.first, r.ns);
      if (r.d == 1)
        out_.span(program_group, track, names_[r.a], from, to,
                  {{"pid", pid}, {"end", std::string_view(how)}, {"raised", std::string_view(text)}, {"resources", std::string_view(resources)}});
      else
        out_.span(program_group, track, names_[r.a], from, to,
                  {{"pid", pid}, {"end", std::string_view(how)}, {"resources", std::string_view(resources)}});
      process_began_.erase(began);
      if (res != process_resources_.end()) process_resources_.erase(res);
      break;
    }
    default: break;
  }
}

std::uint32_t trace_builder::own_track(int group, const char* group_name, std::uint32_t who, const std::string& suffix) {
  if (tracks_named_.insert({group, 0}).second) out_.group(group, group_name, 0, group);
  auto id = who + 1;
  if (tracks_named_.insert({group, id}).second) out_.track(group, id, names_[who] + suffix, 0);
  return id;
}

void trace_builder::track_event(const flight_record& r, const std::string& text) {
  switch (r.kind) {
    case record_kind::collective:
      // The rings' members, each a track of a `collectives` group, a span per call.
      out_.span(collectives_group, own_track(collectives_group, "collectives", r.a, ""), text, r.ns, r.ns + r.d,
                {{"bytes", static_cast<std::int64_t>(r.c)}});
      break;
    case record_kind::memory:
      // Each process's memory, counters of the program (MB).
      if (!program_named_) program_event(flight_record{}, {});
      out_.counter(program_group, names_[r.a], "resident MB", r.ns, static_cast<double>(r.c) / 1e6);
      out_.counter(program_group, names_[r.a], "peak MB", r.ns, static_cast<double>(r.d) / 1e6);
      break;
    case record_kind::manager_call: {
      // Each manager's server a track of a `manager calls` group, a span per recorded call; calls
      // that overlap go to a track of their own beside it (spans on one track must nest).
      auto& lanes = call_lanes_[r.a];
      std::size_t lane = 0;
      while (lane < lanes.size() && lanes[lane] > r.ns) ++lane;
      if (lane == lanes.size()) lanes.push_back(0);
      lanes[lane] = r.ns + r.d;
      auto track = own_track(managers_group, "manager calls", r.a, "");
      if (lane > 0) {
        track = static_cast<std::uint32_t>(lane << 24) | track;
        if (tracks_named_.insert({managers_group, track}).second)
          out_.track(managers_group, track, names_[r.a] + ": calls beside another", 0);
      }
      out_.span(managers_group, track, text, r.ns, r.ns + r.d,
                {{"object", static_cast<std::int64_t>(r.c)}, {"calls", static_cast<std::int64_t>(r.b)}});
      break;
    }
    default: break;
  }
}

void trace_builder::finish() {
  // The run from its start to its last record, on the program's own track: the first thing a
  // reader sees, and what the program's children fall within.
  if (program_named_ && began_ns_) out_.span(program_group, 0, "run", *began_ns_, std::max(last_ns_, *began_ns_), {});
  for (auto& [id, p] : pools_) {
    while (!p.maps.empty()) end_map(p, p.maps.begin()->first, last_ns_);
    p.held.finish(out_, p.group);
    p.waiting.finish(out_, p.group);
  }
}

}  // namespace fiber::detail
