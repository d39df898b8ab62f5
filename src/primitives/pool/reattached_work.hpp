// What a pool's master does with the work of the workers it took up from the last master of a
// durable run: it notes their claims (reattach_claims), gives each claimed chunk's new task to
// its worker rather than to the queue, and reads what the worker sends of its old tasks as
// results of the new ones. The pool's master calls it at its dispatch and on each message of
// results; on fiber's loop thread.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "primitives/pool/reattach_claims.hpp"
#include "primitives/pool/task_queue.hpp"
#include "primitives/pool/worker_set.hpp"
#include "runtime/protocol.hpp"

namespace fiber::detail {

class reattached_work {
 public:
  reattached_work(task_queue& tasks, worker_set& workers) : tasks_(tasks), workers_(workers) {}

  reattach_claims& claims() noexcept { return claims_; }
  /// The task at the queue's front: when a worker taken up claims its chunk, it is that worker's
  /// now (out of the queue, held by it, not sent); true then.
  bool claim_front();
  /// A message of results from `w`: true when it was of an old task, and was read here.
  bool on_results(const pool_worker& w, const header& h, multipart& payload);
  /// Messages that came before their task was made, and can be read now: true when there are.
  bool pending() const noexcept { return !pending_.empty(); }
  void read_pending();
  /// `w` said ready: its messages are of this master's tasks from now on.
  void ready(const pool_worker& w) { claims_.ready(w.rid); }
  void forget(const pool_worker& w) { claims_.forget(w.rid); }

 private:
  /// A message of old task h.request's results, read against its claim.
  void read(const pool_worker& w, const header& h, multipart& payload);

  task_queue& tasks_;
  worker_set& workers_;
  reattach_claims claims_;
  std::vector<std::pair<std::string, multipart>> pending_;  // (worker, message)
};

}  // namespace fiber::detail
