// The flight recorder: what a run did, as compact events in a bounded file of its own, kept after
// the run (and its cluster) are gone. `fiber history` lists the runs, `fiber trace` turns one into
// a trace for Perfetto (fiber/history.hpp).
//
// The file: an 8-byte magic, then records of 40 bytes, each followed by its `text_size` bytes of
// text (names, reasons). Times are nanoseconds since the run began (its `run_begin` record holds
// the wall clock then). Names (a worker's) are said once, in a `name` record, and events refer to
// them by number, so a task's events are 40 bytes each and appending one is a copy into a buffer
// (the cost budget: 2 % at 100,000 tasks a second).
//
// Written by the master's runtime, from any thread (a mutex); the buffer goes to the file when it
// fills, on the rare events (a worker's end, a pool's end), and when the run ends. Past
// `record_max_bytes` a `truncated` record is the last. In a child that is a master of its own (its
// pools), the same buffer goes to the top master instead (open_relay), which adds the records to
// the run's file.
#pragma once
#include <chrono>
#include <functional>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fiber/config.hpp"

namespace fiber::detail {

enum class record_kind : std::uint16_t {
  run_begin = 1,     // a: pid, b: wall clock (ns since the epoch); text: "program\tbackend"
  run_end = 2,       //
  name = 3,          // a: the name's number; text: the name
  pool_begin = 4,    // a: workers asked for, b: pool id
  pool_end = 5,      // b: pool id
  worker_up = 6,     // a: worker (name), b: pool id, c: pid
  worker_down = 7,   // a: worker, b: pool id, c: exit code (-N: signal N), d: 1 if lost (not asked to end),
                     // | 2 if stopped for going past its memory limit; text: how
  task_sent = 8,     // a: worker, b: pool id, c: task id, d: items and its map (task_sent_items)
  task_done = 9,     // a: worker, b: pool id, c: task id, d: how long it ran on its worker (ns, to the µs)
  task_lost = 10,    // a: worker, b: pool id, c: task id (its worker died holding it)
  task_timed_out = 11,  // a: worker, b: pool id, c: task id
  map_begin = 12,    // b: pool id, c: submission id, d: items (0: not known yet)
  map_end = 13,      // b: pool id, c: submission id
  truncated = 14,    // record_max_bytes reached: nothing after this
  process_start = 15,  // a: the child (name), c: pid (0 until its engine says)
  process_end = 16,    // a: the child, c: exit code (-N: signal N), d: 1 if it raised (text: what), 2 if fiber ended it (text: why)
  collective = 17,     // at its start; a: the ring member (its name in the tree), c: bytes (its own
                       // share), d: how long it took (ns); text: which ("allreduce"; " failed" after)
  memory = 18,         // a: the process (its name in the tree; "master"), c: its resident bytes, d: its
                       // peak (record_memory_ms apart, and once at its end)
  process_pending = 19,  // a: the child; text: why its engine has not started it (each new reason)
  resources = 20,        // once the child runs; a: the child, c: cpus, d: what it asked for (resources_of);
                         // text: where its engine put it (local: "cpus 0,1 GPUs 2"), when it says
  manager_call = 21,     // at its start, on the manager's server; a: the server (its name in the tree),
                         // b: calls the record stands for (record_manager_calls; 1 if it raised),
                         // c: the object, d: how long it ran (ns); text: "class.method" (" raised" after)
};

/// A resources record's `d`: memory in MB (the low 32 bits) and GPUs (the high 32).
constexpr std::uint64_t resources_of(std::uint64_t memory_mb, std::uint64_t gpus) {
  return (memory_mb & 0xffffffffu) | (gpus << 32);
}
constexpr std::uint64_t memory_mb_of(std::uint64_t d) { return d & 0xffffffffu; }
constexpr std::uint64_t gpus_of(std::uint64_t d) { return d >> 32; }
/// A recorded exit code in words: "exit code 3", or "signal 9" for -9 (the trace, the dashboard,
/// a pool's worker deaths all say it alike).
std::string exit_text(std::int64_t code);
/// A resources record in words: "cpu 2, 512 MB, 1 GPU; cpus 0,1 GPUs 0" (the trace, the dashboard).
std::string resources_text(std::uint64_t cpus, std::uint64_t d, std::string_view placement);

/// A task_sent record's `d`: its items (the low 40 bits) and the number of the map it is part of
/// (the high 24, as map_begin numbered it; a pool's 16,777,216th map is numbered 0 again).
constexpr std::uint64_t task_sent_items(std::uint64_t items, std::uint64_t map) {
  return (items & ((std::uint64_t{1} << 40) - 1)) | (map << 40);
}
constexpr std::uint64_t items_of_task(std::uint64_t d) { return d & ((std::uint64_t{1} << 40) - 1); }
constexpr std::uint64_t map_of_task(std::uint64_t d) { return d >> 40; }

struct flight_record {
  std::uint64_t ns = 0;  // since the run began
  record_kind kind{};
  std::uint16_t text_size = 0;
  std::uint32_t a = 0;
  std::uint64_t b = 0, c = 0, d = 0;
};
static_assert(sizeof(flight_record) == 40);

inline constexpr char flight_magic[8] = {'F', 'I', 'B', 'E', 'R', 'R', 'E', 'C'};
inline constexpr std::string_view flight_suffix = ".fiberrec";

/// The folder runs are recorded in: config::record_dir, else $XDG_STATE_HOME/fiber/runs, else
/// $HOME/.local/state/fiber/runs.
std::string record_folder(const fiber::config& cfg);
/// This program's file name (what a run is listed under).
std::string program_name();

class flight_recorder {
 public:
  flight_recorder() = default;
  ~flight_recorder() { close(); }
  flight_recorder(const flight_recorder&) = delete;
  flight_recorder& operator=(const flight_recorder&) = delete;

  /// Starts recording run `run_id` when cfg.record (a file that cannot be made is logged, and
  /// nothing is recorded); the oldest runs beyond cfg.record_keep are removed.
  void open(const fiber::config& cfg, const std::string& run_id);
  /// In a child, when cfg.record: the records go to `sink` (bytes in this file's record format,
  /// without the magic, and this recorder's clock then) each time the buffer would go to a file.
  using relay_fn = std::function<void(std::string_view records, std::uint64_t now_ns)>;
  void open_relay(const fiber::config& cfg, relay_fn sink);
  bool on() const noexcept { return fd_ >= 0 || relay_ != nullptr; }
  const std::string& path() const noexcept { return path_; }

  void record(record_kind kind, std::uint32_t a = 0, std::uint64_t b = 0, std::uint64_t c = 0, std::uint64_t d = 0,
              std::string_view text = {});
  /// A record of an event at `ns` on this recorder's clock (a relayed one, already past).
  void record_at(std::uint64_t ns, record_kind kind, std::uint32_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d,
                 std::string_view text);
  /// This recorder's clock: nanoseconds since it opened.
  std::uint64_t now_ns() const;
  /// The number a name is recorded under (said in a `name` record the first time).
  std::uint32_t name(std::string_view n);
  /// Writes what is buffered.
  void flush();
  /// Records run_end, flushes and closes.
  void close();

 private:
  void append(const flight_record& given, std::string_view text);
  void write_out();

  std::mutex mutex_;
  int fd_ = -1;
  relay_fn relay_;
  std::string path_;
  std::chrono::steady_clock::time_point began_;
  std::vector<char> buffer_;
  std::uint64_t written_ = 0, max_bytes_ = 0;
  bool truncated_ = false;
  std::unordered_map<std::string, std::uint32_t> names_;
};

/// The records of a run's file, with their texts; throws fiber::error (malformed_message) naming
/// the file when it cannot be read or is not a recording. A file cut short (the run was killed
/// while writing) gives the records before the cut.
struct read_record {
  flight_record r;
  std::string text;
};
std::vector<read_record> read_flight_file(const std::string& path);

}  // namespace fiber::detail
