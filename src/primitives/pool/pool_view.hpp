// What the run's dashboard shows of a pool: its state, its stats, its first workers with what
// each holds, and its newest failures (a worker's end that was not asked for, an item's timeout,
// workers that cannot start) with their time since the pool began. On fiber's loop thread.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include "fiber/pool_options.hpp"

namespace fiber::detail {
class task_queue;
class worker_set;

class pool_view {
 public:
  static constexpr std::size_t failures_kept = 20;
  /// A page stays readable, and a sample cheap, with thousands of workers: the first ones are
  /// listed, all are counted.
  static constexpr std::size_t workers_listed = 256;

  /// Keeps `what` among the newest failures_kept.
  void note_failure(std::string what);
  /// The failures kept, oldest first, as the page reads them ({at_s, what}).
  boost::json::array failures() const;
  /// The pool as the page shows it; without `rows`, its numbers and failures but no worker's row
  /// (what a tick that no page reads needs).
  boost::json::object describe(std::uint64_t id, std::string_view state, const pool_stats& s, worker_set& workers,
                               const task_queue& tasks, bool rows = true) const;

 private:
  std::chrono::steady_clock::time_point began_ = std::chrono::steady_clock::now();
  std::deque<std::pair<double, std::string>> failures_;
};

}  // namespace fiber::detail
