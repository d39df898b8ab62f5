// A run's recording as a trace (core/trace_sink.hpp, in either format), record by record. What a
// user reads first: the program (its children, each from its start to its end, and the memory of
// each process), then each pool: its master's track with a span per map (its submission to its
// last result) and a track per worker with a span per task (from its sending, or the end of the
// one before it on that worker, to its end) and an arrow from its sending; a counter of the tasks
// each pool's workers hold. Then the rings' collectives and the managers' calls. One part per
// family of records; finish() closes what the recording left open (a run cut short).
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/flight_recorder.hpp"
#include "core/sampled_counter.hpp"
#include "core/trace_sink.hpp"

namespace fiber::detail {

class trace_builder {
 public:
  explicit trace_builder(trace_sink& out) : out_(out) {}
  void add(const flight_record& r, const std::string& text);
  /// Ends the spans still open (maps a killed or cut run never ended) at the last record's time.
  void finish();

 private:
  struct sent {
    std::uint64_t task, ns, items, map, flow;
  };
  struct open_map {
    std::uint64_t ns, items;
    std::uint32_t lane;
    std::uint64_t done = 0, held = 0;  // its items answered, and held by workers now
    /// Its items not yet sent (or sent again after a loss); 0 for a map of unknown size.
    std::int64_t waiting() const {
      return items > done + held ? static_cast<std::int64_t>(items - done - held) : 0;
    }
  };
  struct pool_state {
    int group = 0;
    std::vector<bool> lanes_busy;  // the master's tracks for maps, a map on each at a time
    std::map<std::uint64_t, open_map> maps;
    sampled_counter held{"tasks", "held by workers"};
    sampled_counter waiting{"items", "waiting to be sent"};
  };
  void program_event(const flight_record& r, const std::string& text);
  pool_state& pool(std::uint64_t id, const std::string& in = {});
  void pool_event(const flight_record& r, const std::string& text);
  void map_event(const flight_record& r);
  void end_map(pool_state& p, std::uint64_t map, std::uint64_t ns);
  void task_event(const flight_record& r);
  void end_task(const flight_record& r, const char* how);
  /// Applies `f` to map `map` of `p` (when open) and moves the waiting items' counter with it.
  template <class F>
  void on_map(pool_state& p, std::uint64_t map, std::uint64_t ns, F f);
  void process_event(const flight_record& r, const std::string& text);
  /// The program's track of child `child`, named once.
  std::uint32_t child_track(std::uint32_t child);
  /// A track of one of the run's own groups (collectives, manager calls), named once.
  std::uint32_t own_track(int group, const char* group_name, std::uint32_t who, const std::string& suffix);
  void track_event(const flight_record& r, const std::string& text);

  trace_sink& out_;
  std::uint64_t last_ns_ = 0;
  std::optional<std::uint64_t> began_ns_;  // the run's start, when recorded
  std::int64_t master_pid_ = 0;
  bool program_named_ = false;
  std::unordered_map<std::uint32_t, std::string> names_;
  std::unordered_map<std::uint32_t, std::int64_t> pids_;  // name -> its process's pid, once known
  std::map<std::uint64_t, pool_state> pools_;             // pool id -> its state
  std::unordered_map<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>> process_began_;  // child -> (ns, pid)
  std::unordered_map<std::uint32_t, std::string> process_resources_;  // child -> its resources, in words
  std::set<std::pair<int, std::uint32_t>> tracks_named_;
  std::map<std::uint32_t, std::vector<std::uint64_t>> call_lanes_;  // server -> each lane's last end
  std::uint64_t flows_ = 0;
  std::map<std::pair<int, std::uint32_t>, std::deque<sent>> held_;  // per worker, in the order sent
  std::map<std::pair<int, std::uint32_t>, std::uint64_t> free_since_;
};

}  // namespace fiber::detail
