// What a process tells about its run, for the recording (core/flight_recorder, config record) and
// the live page (runtime/observe/dashboard, config dashboard): in the top master it keeps the
// run's one recording and its dashboard, takes in what its tree sends up (a nested master's child
// events and its recorder's batches, moved onto this clock and into this recording's names), and
// samples its own memory; in a worker it records into a relay whose batches go up, and sends its
// children's events and its pools' states up to the top. On the loop thread, but for the
// recorder, which takes records from any thread.
#pragma once
#include <asio/steady_timer.hpp>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/flight_recorder.hpp"
#include "fiber/config.hpp"
#include "runtime/event_loop.hpp"
#include "runtime/observe/dashboard.hpp"
#include "runtime/observe/memory_sampler.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {
class worker_side;

class run_observer {
 public:
  /// `loop` and `cfg` outlive this.
  run_observer(event_loop& loop, const fiber::config& cfg) : loop_(loop), cfg_(cfg) {}
  ~run_observer();
  run_observer(const run_observer&) = delete;
  run_observer& operator=(const run_observer&) = delete;

  /// The top master: opens the run's recording and its dashboard (if configured), and samples the
  /// memory every record_memory_ms.
  void open_top(const std::string& job_id);
  /// A worker: its records go to its master through `up`, in batches that name it by its channel
  /// prefix (read at each batch: a nested master's child learns it late) and `tree` (its place in
  /// the tree). `up` and `channel_prefix` outlive this.
  void open_relay(worker_side& up, const std::uint64_t& channel_prefix, std::string tree);
  /// This process became a nested master: with a dashboard, its pools are shown on the top's page.
  void became_nested_master() noexcept { nested_master_ = true; }

  flight_recorder& recorder() noexcept { return recorder_; }
  /// The run's live page (the top master's, configured), or null.
  dashboard* run_dashboard() noexcept { return dashboard_.get(); }
  /// A nested master whose run has a dashboard: its pools are shown on the top's page, each state
  /// sent up (kind::pool_view), `ended` with its last. False in the top master and without one.
  bool shows_pools_upstream() const noexcept { return up_ && nested_master_ && cfg_.dashboard; }
  void show_pool_upstream(std::uint64_t pool, std::string_view state, bool ended);
  /// Records an event of a child this process started (`name`: its name in the tree): here in the
  /// top master, else sent up to it (a nested master's children are in the run's recording too).
  void record_child_event(record_kind k, std::string_view name, std::uint64_t c, std::uint64_t d = 0,
                          std::string_view text = {});
  /// The top master: a nested master's records (kind::record_batch) into the run's recording.
  void take_record_batch(std::uint64_t sender, std::uint64_t child_now, std::string_view tree, std::string_view records);
  /// The process's last memory record, once: a worker takes it before it reports `done` (so it is
  /// in the recording before its end), and ending() takes it where that did not happen.
  void record_last_memory();

  /// The run is ending: the sampling stops, the last memory is recorded, nothing more goes up.
  void ending();
  /// The recording ends (a worker's last batch goes up while its connection is there); the
  /// dashboard closes with close().
  void close_recording() { recorder_.close(); }
  void close();

 private:
  void record_memory();
  /// Records the memory every record_memory_ms while this runs, a worker's only while it works
  /// (on the loop).
  void start_sampling();
  void send_up(const std::shared_ptr<multipart>& m);

  event_loop& loop_;
  const fiber::config& cfg_;
  flight_recorder recorder_;
  std::unique_ptr<dashboard> dashboard_;
  worker_side* up_ = nullptr;
  bool nested_master_ = false;
  bool ending_ = false;
  struct relayed_name {
    std::uint32_t ours = 0;
    std::string in_tree;  // the name itself, as the run's tree spells it
  };
  std::map<std::uint64_t, std::unordered_map<std::uint32_t, relayed_name>> relayed_names_;  // by sender: its name numbers
  std::optional<memory_sampler> sampler_;
  bool sampling_ = false;  // what the sampler's record sends up is not the worker's work
  std::atomic<bool> last_memory_recorded_{false};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // posted sends outlive nothing
};

}  // namespace fiber::detail
