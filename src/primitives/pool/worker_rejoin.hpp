// A durable run's pool worker, ready for its master's end: it keeps the results of its tasks until
// its master's journal holds them on disk (held_results), opens a reattach point (runtime/links/reattach_point) whose name and secret its
// master journals, and, on the master's host, lets the kernel's parent-death signal go, so that a
// killed master does not take the worker and its item with it. A worker an engine runs (a
// container, a pod, a Slurm job) listens on TCP at the address its master's network reaches,
// and learns of the master's end from its link. When a master that takes
// the run up dials in and proves the secret, the worker links to it (its hello with the new
// master's one-time word), and its service loop hears `rejoined`: it says it is ready again and
// sends the results it holds, which the new master matches to its chunks. With no such master
// within reattach_grace_ms, the worker exits as it always did.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "primitives/pool/held_results.hpp"
#include "runtime/protocol.hpp"

namespace fiber::detail {
class runtime;
class reattach_point;

class worker_rejoin {
 public:
  /// Null unless the run is durable, the worker is a child of the top master on its host, and
  /// reattach_grace_ms is above 0: then armed, and the master told where to find it.
  static std::unique_ptr<worker_rejoin> arm(runtime& rt, std::uint64_t pool_id);
  ~worker_rejoin();

  held_results& held() noexcept { return held_; }
  /// Its service loop heard `rejoined` (h): the pool's id at the new master, to which it says it
  /// can take `credit` chunks, and sends what it holds.
  std::uint64_t rejoined(const header& h, int credit);

 private:
  /// `tcp_host`: empty for a worker on its master's host, else the address its point listens on.
  worker_rejoin(runtime& rt, std::uint64_t pool_id, const std::string& tcp_host);
  /// The new master's record (JSON): link to it; returns its pid. On the point's thread.
  int relink(const std::string& record);

  runtime& rt_;
  std::atomic<std::uint64_t> pool_id_;
  held_results held_;
  bool here_;  // on its master's host: a unix point, the master's process watched
  /// What the link's loss handler reads, from the link's watch thread too: shared with the
  /// handler, which the worker's link keeps after this part is gone (it then ends the worker as
  /// without one).
  struct loss_state {
    std::mutex mutex;            // the point's relinks against the old link's end
    std::uint64_t relinks = 0;   // under mutex
    reattach_point* point = nullptr;  // under mutex; null once this part is gone
  };
  std::shared_ptr<loss_state> loss_ = std::make_shared<loss_state>();
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // what was posted runs only while this lives
  std::unique_ptr<reattach_point> point_;
};

}  // namespace fiber::detail
