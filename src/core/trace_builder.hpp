// A run's recording as trace events (core/trace_writer.hpp), record by record: each pool a
// process with a track per worker (a span per task, from its sending, or the end of the one
// before it on that worker, to its end; an arrow from its map), the master's children on the
// `processes` track, and the tracks of the rings' collectives, each process's memory and the
// managers' calls. One part per family of records.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/flight_recorder.hpp"
#include "core/trace_writer.hpp"

namespace fiber::detail {

class trace_builder {
 public:
  explicit trace_builder(trace_writer& out) : out_(out) {}
  void add(const flight_record& r, const std::string& text);

 private:
  struct sent {
    std::uint64_t task, ns, items, map;
  };
  /// The trace's process number of pool `id`, named on first use.
  int pool_pid(std::uint64_t id);
  void pool_event(const flight_record& r, const std::string& text);
  void end_task(const flight_record& r, const char* how);
  void process_event(const flight_record& r, const std::string& text);
  void name_processes_track(std::uint32_t tid);
  /// A track of one of the runs' own processes (collectives, memory, manager calls), named once.
  void own_track(int pid, const char* process, std::uint32_t tid);
  void track_event(const flight_record& r, const std::string& text);

  trace_writer& out_;
  std::unordered_map<std::uint32_t, std::string> names_;
  std::map<std::uint64_t, int> pools_;  // pool id -> the trace's process number
  std::map<std::pair<int, std::uint64_t>, std::uint64_t> map_at_;  // (pool, map) -> when it was submitted
  std::unordered_map<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>> process_began_;  // child -> (ns, pid)
  std::unordered_map<std::uint32_t, std::string> process_resources_;  // child -> its resources, in words
  bool processes_named_ = false;
  std::set<int> own_named_;                        // own processes named
  std::set<std::pair<int, std::uint32_t>> own_tracks_;  // their tracks named
  std::uint64_t flows_ = 0;
  std::map<std::pair<int, std::uint32_t>, std::deque<sent>> held_;  // per worker, in the order sent
  std::map<std::pair<int, std::uint32_t>, std::uint64_t> free_since_;
};

}  // namespace fiber::detail
