// The master's side of a pool: the service that routes the workers' messages to its parts, a
// task queue (pool/task_queue.hpp), a worker set (pool/worker_set.hpp) and the progress line
// (pool/progress_line.hpp), and that matches tasks to workers (dispatch). Workers pull chunks
// of tasks with a small credit each. The wire is pool/wire.hpp.
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
#include "primitives/pool/progress_line.hpp"
#include "primitives/pool/task_queue.hpp"
#include "primitives/pool/worker_set.hpp"
#include "runtime/service_registry.hpp"

namespace fiber::detail {
struct hosted_at;

class pool_master final : public pool_core, public service, public std::enable_shared_from_this<pool_master> {
 public:
  pool_master(std::shared_ptr<runtime> rt, pool_options options);
  ~pool_master();

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
  void resize(int processes) override;
  void cancel(pool_sink& sink) override;
  void when_joined(unique_function<void()> done) override;
  void when_ready(unique_function<void()> done) override;
  pool_stats stats() const override;
  /// What the run's dashboard shows of this pool: its stats, each worker's state, its failures.
  boost::json::object describe() const;
  void on_message(const std::string& peer, const header& h, multipart&& payload) override;
  void on_shutdown() noexcept override;

 private:
  friend class pool_core;  // make() starts it once fiber's loop runs
  void start();
  /// Sends queued tasks to workers with credit until either runs out.
  void dispatch();
  void on_worker_ended(pool_worker&& w);
  void fail_all(std::exception_ptr e);
  /// The work of the submissions the workers no longer cover fails with `e`.
  void fail_uncovered(std::exception_ptr e);
  /// After close(): once the work is done, the workers are told to leave.
  void maybe_stop_workers();
  void check_joined();
  void check_ready();
  std::optional<progress_line::frame> progress_frame();
  /// Task timeouts: one timer at the earliest deadline of an item running; `w` just started one.
  void watch_deadline(pool_worker& w);
  std::optional<std::chrono::steady_clock::time_point> deadline_of(const pool_worker& w) const;
  void arm_deadline(std::chrono::steady_clock::time_point when);
  void on_deadline();

  static pool_options checked(pool_options options);
  /// The fiber::shared objects `args` refer to that `w` lacks, as frames to send before the
  /// items (transport/shared_frames.hpp); they are counted as w's from now on.
  struct attached {
    multipart frames;
    std::size_t count = 0;  // objects
    std::size_t bytes = 0;  // of them in the frames (not in host memory, not fetched from a peer)
  };
  attached attach_shared(pool_worker& w, const writer& args);
  /// The last handle of shared object `id` went: its workers let it go.
  void on_shared_released(std::uint64_t id);
  void release_to(pool_worker& w, std::uint64_t id);
  // A large shared object on remote hosts (transport/shared_frames.hpp): the first worker of a
  // memory domain gets it whole, from the master once and after that from a worker that has it
  // (transport/shared_server.hpp), and copies it into its host's memory for its mates.
  struct host_copy {
    std::string holder;  // the worker getting (or that got) the object whole for its domain
    std::string source;  // the worker it fetches from, until it has it
    int pid = 0, fd = -1;  // where the domain's copy is, once made
    std::vector<std::string> waiting;  // workers of the domain sent `later`, until it is made
  };
  struct object_source {
    std::string rid, endpoint, public_key;  // a worker with the object whole, and its server
    int serving = 0;                        // fetches from it under way
  };
  struct object_sources {
    std::vector<object_source> ready;
    int inflight = 0;                   // holders getting the object whole now
    int master_copies = 0;              // sent whole by the master to a domain's holder
    std::vector<std::string> pending;   // holders waiting for a source
  };
  static constexpr int source_fanout = 2, master_fanout = 2;
  bool has_host_mates(const pool_worker& w);
  /// Returns the bytes of the object it put in `out`.
  std::size_t attach_for_remote_host(multipart& out, pool_worker& w, const std::shared_ptr<const shared_entry>& e);
  object_source* free_source(object_sources& src);
  object_source* find_source(std::uint64_t id, const std::string& rid);
  void fetch_from(multipart& out, pool_worker& w, const shared_entry& e, object_source& from, host_copy& st);
  std::shared_ptr<const shared_entry> entry_held(const pool_worker& w, std::uint64_t id) const;
  /// Sends `w` shared object `id` whole (it waits for it); `as_holder`: it is its domain's holder
  /// (it makes the copy and becomes a source).
  void send_whole(pool_worker& w, std::uint64_t id, bool as_holder);
  void on_need(pool_worker& w, std::uint64_t id);
  void on_hosted(pool_worker& w, const hosted_at& at, const std::string& server);
  void serve_pending(std::uint64_t id);
  void forget_host_copies(std::uint64_t id);
  void on_holder_lost(const pool_worker& w);

  std::shared_ptr<runtime> rt_;
  pool_options options_;
  std::uint64_t id_;
  std::atomic<bool> closed_ = false;  // read by check_open from the caller's thread
  bool terminating_ = false;
  task_queue tasks_;
  worker_set workers_;
  progress_line progress_;
  std::size_t workers_lost_ = 0;
  std::uint64_t maps_ = 0;  // submissions so far: their number in the flight recorder
  std::size_t total_hint_ = 0;  // items submitted while the progress line is up
  std::vector<unique_function<void()>> joined_waiters_, ready_waiters_;
  bool timeouts_used_ = false;  // a submission had a task timeout: deadlines are watched
  std::unique_ptr<asio::steady_timer> deadline_timer_;
  /// A nested master's pool on the run's dashboard: its state sent up every dashboard_interval_ms.
  void show_upstream_every();
  void show_upstream();
  std::unique_ptr<asio::steady_timer> view_timer_;
  std::string last_view_;
  bool shared_in_host_memory_ = false;  // workers map shared objects from this host's memory
  static constexpr std::size_t host_memory_min_bytes = std::size_t(1) << 20;
  std::unordered_set<std::uint64_t> watched_;  // shared objects sent, whose release is watched
  std::map<std::pair<std::string, std::uint64_t>, host_copy> host_copies_;  // by memory domain and object
  std::unordered_map<std::uint64_t, object_sources> sources_;               // by object
  std::size_t shared_sent_ = 0;
  std::uint64_t shared_bytes_sent_ = 0, shared_bytes_host_ = 0;
  std::optional<std::chrono::steady_clock::time_point> deadline_armed_;
  // For the dashboard: the newest failures (a worker's end that was not asked for, an item's
  // timeout, workers that cannot start), with their time since the pool began.
  void note_failure(std::string what);
  static constexpr std::size_t failures_kept = 20;
  std::chrono::steady_clock::time_point began_ = std::chrono::steady_clock::now();
  std::deque<std::pair<double, std::string>> failures_;
};

}  // namespace fiber::detail
