// The master's side of a pool: the service that routes the workers' messages to its parts and
// matches queued tasks to workers (dispatch). Its parts: the task queue (pool/task_queue.hpp),
// the worker set (pool/worker_set.hpp), the shared-object courier (pool/shared_courier.hpp), the
// items under a deadline (pool/late_items.hpp), the dashboard's view (pool/pool_view.hpp, sent up
// by pool/pool_upstream.hpp from a nested master), the progress line and the waits for ready and
// joined (pool/milestones.hpp), a call's time request (pool/time_request.hpp). Workers pull
// chunks of tasks with a small credit each. The wire is pool/wire.hpp.
#pragma once
#include <atomic>
#include <boost/json/object.hpp>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fiber/detail/pool_core.hpp"
#include "primitives/pool/durable_maps.hpp"
#include "primitives/pool/journal_acks.hpp"
#include "primitives/pool/late_items.hpp"
#include "primitives/pool/milestones.hpp"
#include "primitives/pool/outside_deaths.hpp"
#include "primitives/pool/pool_upstream.hpp"
#include "primitives/pool/pool_view.hpp"
#include "primitives/pool/progress_line.hpp"
#include "primitives/pool/reattached_work.hpp"
#include "primitives/pool/shared_courier.hpp"
#include "primitives/pool/task_queue.hpp"
#include "primitives/pool/time_request.hpp"
#include "primitives/pool/worker_directory.hpp"
#include "primitives/pool/worker_ends.hpp"
#include "runtime/idle_trim.hpp"
#include "primitives/pool/worker_set.hpp"
#include "runtime/services/service_registry.hpp"

namespace fiber::detail {
struct hosted_at;

class pool_master final : public pool_core, public service, public std::enable_shared_from_this<pool_master> {
 public:
  pool_master(std::shared_ptr<runtime> rt, pool_options options);
  ~pool_master() override;

  // pool_core, from any thread
  const std::shared_ptr<runtime>& rt() const override { return rt_; }
  void check_open() const override;
  void on_loop(unique_function<void(pool_core&)> f) override;
  void terminate_soon() override;

  // pool_core and service, on the loop thread
  void submit(std::uint64_t function_id, std::size_t chunksize, std::size_t size_hint, std::shared_ptr<pool_sink> sink,
              call_options call) override;
  void pump() override { dispatch(); }
  void close() override;
  void terminate() override;
  bool open() const override { return !closed_; }
  void resize(int n) override;
  void cancel(pool_sink& sink) override;
  void when_joined(unique_function<void()> done) override;
  void when_ready(unique_function<void()> done) override;
  pool_stats stats() const override;
  /// What the run's dashboard shows of this pool: its stats, each worker's state (with `rows`),
  /// its failures.
  boost::json::object describe(bool rows = true) const;
  void on_message(const std::string& peer, const header& h, multipart&& payload) override;
  void on_shutdown() noexcept override;

 private:
  friend class pool_core;  // make() starts it once fiber's loop runs
  void start();
  /// Sends queued tasks to workers with credit until either runs out.
  void dispatch();
  void on_worker_ended(const pool_worker& w);
  void fail_all(const std::exception_ptr& e);
  /// After close(): once the work is done, the workers are told to leave.
  void maybe_stop_workers();
  std::optional<progress_line::frame> progress_frame();

  std::shared_ptr<runtime> rt_;
  pool_options options_;
  std::uint64_t id_;
  std::atomic<bool> closed_ = false;  // read by check_open from the caller's thread
  bool terminating_ = false;
  task_queue tasks_;
  worker_set workers_;
  worker_directory directory_;
  reattached_work reattached_{tasks_, workers_};  // a durable run taken up: its last master's workers' work
  shared_courier courier_;
  pool_view view_;  // what the run's dashboard shows of it
  late_items late_;
  outside_deaths outside_;  // deaths from outside in a row: bounded
  progress_line progress_;
  worker_ends ends_{*rt_, id_, view_, tasks_};  // how each worker ended, and the counts of it
  time_request time_{id_, workers_, tasks_};     // items go to workers with the time they take
  std::uint64_t maps_ = 0;  // submissions so far: their number in the flight recorder
  std::size_t calls_open_ = 0;   // submissions not finished
  idle_trim* trim_ = nullptr;    // the loop's, once a call has asked for it
  idle_trim::hold busy_;         // held while any is: the process gives freed memory back once idle
  std::size_t total_hint_ = 0;  // items submitted while the progress line is up
  milestones milestones_{
      [this] {  // ready: its workers connected, or they cannot start, or it closed
        auto c = workers_.count();
        return c.connected >= static_cast<std::size_t>(c.target) || workers_.starter().stopped() || closed_;
      },
      [this] { return closed_ && workers_.count().empty; }};  // joined
  pool_upstream upstream_;  // a nested master's pool, on the page of the master above
  std::unique_ptr<durable_maps> durable_;  // a durable run's: its calls' journal
  std::exception_ptr durable_failed_;      // ... which could not be opened: each call fails with it
  std::shared_ptr<journal_acks> acks_;     // ... and what it tells its workers of what is on disk
};

}  // namespace fiber::detail
