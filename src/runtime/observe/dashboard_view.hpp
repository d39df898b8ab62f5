// What the dashboard shows (runtime/observe/dashboard): the parts of a run that describe themselves (its
// pools), the processes of its tree, and the run's totals sampled over time for the plot. Taken
// on the master's loop thread, where the parts live, so no part is locked to describe itself.
#pragma once
#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/flight_recorder.hpp"

namespace fiber::detail {

class dashboard_view {
 public:
  /// A part's state now, or nothing once the part is gone (its last state stays, as ended); with
  /// `rows` false only what is cheap to say (its numbers, not a row per worker): what a tick
  /// that no page reads needs.
  using describe_fn = std::function<std::optional<boost::json::object>(bool rows)>;

  /// `run`, `program`, `backend`: the page's title.
  dashboard_view(std::string run, std::string program, std::string backend);

  /// A pool, until its describe_fn says it is gone. Its state has a "stats" object whose numbers
  /// add up to the run's totals (the pool_stats fields).
  void add_pool(std::uint64_t id, describe_fn describe);
  /// A pool of a nested master (`tree`: where it runs), as it last said (kind::pool_view); one
  /// whose process ended without saying it ended is shown ended.
  void show_pool(std::uint64_t id, std::string_view tree, std::string_view state, bool ended);
  /// A child of the run's tree started or ended (record_kind::process_start / process_end, with
  /// the recorder's c, d and text).
  void on_process(record_kind k, std::string_view name, std::uint64_t c, std::uint64_t d, std::string_view text);
  /// A child of the run's tree holds `resident` bytes now (its record_kind::memory), shown beside
  /// its limit.
  void on_memory(std::string_view name, std::uint64_t resident);

  /// Takes the parts' numbers now and adds a point to the plot. No row is built: with no page
  /// open a thousand idle workers cost a tick nothing per worker but a count.
  void tick();
  /// What the page shows, as JSON, taken now (the rates are those of the last point).
  boost::json::object sample();

  static constexpr std::size_t history_points = 240;   // the plot's points, one per sample
  static constexpr std::size_t ended_pools_kept = 8;   // the newest; older ones add to the totals only
  static constexpr std::size_t processes_listed = 100;  // running ones first, then the newest ended

 private:
  struct pool_entry {
    describe_fn describe;
    boost::json::object last;
    bool ended = false;
    bool said_ended = false;  // a nested master's pool that sent its last state (show_pool)
  };
  struct process_entry {
    std::uint64_t pid = 0;
    bool running = true;
    std::int64_t code = 0;
    std::string raised;
    std::string resources{};    // what it asked for, and where its engine put it
    std::uint64_t resident = 0;  // bytes, as it last said
    std::uint64_t order = 0;  // when it started or ended, for the list's order
  };
  struct totals {
    std::uint64_t queued = 0, running = 0, done = 0, retried = 0, workers = 0, workers_lost = 0, workers_started = 0;
  };
  void add_stats(totals& t, const boost::json::object& stats) const;
  /// Asks the live pools for their state (`rows`: whole, else their numbers over what they said
  /// last), drops the oldest ended ones, and sums the numbers.
  totals refresh(bool rows);

  std::string run_, program_, backend_;
  std::chrono::steady_clock::time_point began_ = std::chrono::steady_clock::now();
  std::map<std::uint64_t, pool_entry> pools_;
  totals dropped_;  // of the ended pools no longer listed
  std::map<std::string, process_entry, std::less<>> processes_;
  std::uint64_t process_events_ = 0;
  std::size_t processes_running_ = 0, processes_ended_ = 0;
  struct point {
    double t_s, done_per_s, retried_per_s;
    std::uint64_t running, queued;
  };
  std::deque<point> history_;
  std::optional<std::pair<double, totals>> last_;  // the previous sample's time and totals
};

}  // namespace fiber::detail
