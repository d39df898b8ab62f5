/// @file
/// Runs the flight recorder kept (config key `record`, on by default): what each did, after it
/// ended and its cluster is gone. `fiber history` and `fiber trace` print these.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "fiber/config.hpp"
#include "fiber/detail/export.hpp"

namespace fiber {

/// One recorded run, summed up from its file.
struct recorded_run {
  std::string id;    ///< the run's job id
  std::string path;  ///< its recording
  std::string program;  ///< the master's executable
  std::string backend;  ///< where its children ran: local, docker, kubernetes or slurm
  std::chrono::system_clock::time_point began;  ///< when the master started
  double seconds = 0;      ///< from its start to its last record
  bool ended = false;      ///< it recorded its end (false: it was killed, or runs still)
  bool truncated = false;  ///< it reached record_max_bytes: later events are not in it
  std::uint64_t pools = 0;            ///< pools made
  std::uint64_t maps = 0;             ///< calls on pools (map, imap, apply, ...)
  std::uint64_t tasks_sent = 0;       ///< items sent to workers, a resent one each time
  std::uint64_t tasks_done = 0;       ///< items answered
  std::uint64_t tasks_lost = 0;       ///< items whose worker died while it held them
  std::uint64_t tasks_timed_out = 0;  ///< items that ran past their task_timeout
  std::uint64_t workers_started = 0;  ///< pool workers started, replacements included
  std::uint64_t workers_lost = 0;     ///< pool workers that died
  std::uint64_t workers_memory_exceeded = 0;  ///< pool workers stopped for going past their memory limit
  /// Every child the master started: processes, pool workers, managers' servers, ring members.
  std::uint64_t processes = 0;
};

/// The runs recorded in record_dir (see docs/config.md), newest first.
FIBER_API std::vector<recorded_run> run_history(const config& cfg = config::load());

/// The formats of a trace: Chrome's JSON (Perfetto's UI, chrome://tracing and speedscope open it)
/// or Perfetto's own protobuf format (a fraction of the size; Perfetto's UI and trace processor).
enum class trace_format { chrome_json, perfetto };

/// Writes a recorded run as a trace: the program first (a track per child of the master, a span
/// from its start to its end, each process's memory as counters), then a group per pool: its
/// master's track with a span per map, a track per worker with a span per task from when the
/// worker took it up to its result and an arrow from its sending, marks for a worker's start and
/// end and a task's timeout, and a counter of the tasks its workers hold. `run`: an id or the
/// start of one, "last" (the newest), or a file's path. Throws fiber::error (config_error) when no
/// run matches or the trace cannot be written.
FIBER_API recorded_run write_trace(const std::string& run, const std::string& out_path, trace_format format,
                                   const config& cfg = config::load());
/// Writes a recorded run as one self-contained HTML page: its totals, tasks done per second and
/// workers over time with its failures marked (a worker's death, a task lost or timed out). Opens
/// from a file in any browser; runs no script. Throws as write_trace does.
FIBER_API recorded_run write_history_page(const std::string& run, const std::string& out_path, const config& cfg = config::load());
/// write_trace in Chrome's JSON.
FIBER_API recorded_run write_trace(const std::string& run, const std::string& out_path, const config& cfg = config::load());

}  // namespace fiber
