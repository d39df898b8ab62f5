// The per-process engine behind fiber::context: io_context, ZeroMQ sockets, the channel broker,
// children's handshakes. Everything here runs on the io_context's thread.
#pragma once
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <zmq.hpp>

#include "backend/backend.hpp"
#include "fiber/config.hpp"
#include "fiber/detail/message.hpp"
#include "transport/message_frames.hpp"
#include "transport/zmq_channel.hpp"
#include "runtime/protocol.hpp"

namespace fiber::detail {
class master_watch;

/// A job's secrets. CURVE keys (Z85) for channels that cross a network; a password for local
/// unix sockets, which the kernel keeps private, so they need authentication, not encryption.
struct job_keys {
  std::string server_public, server_secret, client_public, client_secret;
  std::string password;
  bool plain = false;  // worker: connect with PLAIN (password) rather than CURVE
  static job_keys generate();
  /// What a worker gets through its environment: "plain,<password>" or
  /// "curve,<server public>,<client public>,<client secret>" (Z85 has no comma).
  std::string for_worker(bool plain) const;
  /// Throws fiber::error(protocol_error) on malformed text.
  static job_keys from_worker_text(std::string_view text);
};

/// What a master needs from a child it started (implemented by process_state).
class child_endpoint {
 public:
  virtual ~child_endpoint() = default;
  virtual void on_hello(const std::string& hello_json) = 0;
  virtual void on_done(bool raised, const std::string& detail_json) = 0;
  /// The master is shutting down: kill, reap, and complete whoever waits.
  virtual void on_master_shutdown() noexcept = 0;
};

/// Something that peers talk to by id: on the master a pool or a manager, in a worker the
/// caller's side of a manager. Called on the loop thread.
class service {
 public:
  virtual ~service() = default;
  virtual void on_message(const std::string& peer, const header& h, multipart&& payload) = 0;
  /// The runtime is shutting down: cancel timers, so that a caller's io_context runs out of work.
  virtual void on_shutdown() noexcept {}
};

class runtime : public std::enable_shared_from_this<runtime> {
 public:
  enum class role { master, worker };
  /// `may_run_inline`: false when called inside the initiating call (the handler must post).
  using get_handler = unique_function<void(std::error_code, multipart, bool may_run_inline)>;

  /// A master: owns an io_context and a thread when `external` is null.
  runtime(asio::io_context* external, fiber::config cfg);
  /// A worker: connects to its master; the caller runs io() on its own thread.
  runtime(fiber::config cfg, std::string job_id, job_keys keys, std::string master_endpoint, std::string token);
  ~runtime();

  asio::io_context& io() noexcept { return *io_; }
  asio::any_io_executor executor() noexcept { return io_->get_executor(); }
  bool in_loop_thread() const noexcept;
  const fiber::config& cfg() const noexcept { return cfg_; }
  void replace_config(fiber::config cfg) { cfg_ = std::move(cfg); }
  role my_role() const noexcept { return role_; }
  bool is_shut_down() const noexcept { return shut_down_; }
  /// True when this runtime owns its io_context (a blocking caller may run it).
  bool owns_loop() const noexcept { return owned_io_ != nullptr; }
  const std::string& job_id() const noexcept { return job_id_; }
  const job_keys& keys() const noexcept { return keys_; }
  /// Credentials for a child of this master (valid after listen()).
  std::string worker_credentials() const { return keys_.for_worker(plain_auth_); }
  zmq::context_t& zmq() noexcept { return zctx_; }

  // ---- channels (queues and pipes), on the loop thread
  std::uint64_t new_channel_id() noexcept;
  /// Throws message_too_large before anything is sent.
  void put(std::uint64_t channel, writer& w);
  void get(std::uint64_t channel, std::optional<std::chrono::milliseconds> timeout, get_handler h);
  void release(std::uint64_t channel) noexcept;

  // ---- master side
  /// Binds the listening socket on first use; returns the endpoint children connect to.
  const std::string& listen();
  std::vector<std::string> endpoints() const;
  backend& the_backend();
  void attach_child(const std::string& routing_id, std::weak_ptr<child_endpoint> child);
  void detach_child(const std::string& routing_id);
  void send_to_child(const std::string& routing_id, multipart&& parts);
  /// As send_to_child, but tells: an error means the child's connection is gone.
  std::error_code try_send_to_child(const std::string& routing_id, multipart&& parts);
  void add_service(std::uint64_t id, std::weak_ptr<service> s) { services_[id] = std::move(s); }
  void remove_service(std::uint64_t id) { services_.erase(id); }
  std::shared_ptr<service> find_service(std::uint64_t id) const {
    auto it = services_.find(id);
    return it == services_.end() ? nullptr : it->second.lock();
  }
  /// Children still running, and what to do with them when the master goes.
  void track_job(job* j) { live_jobs_.push_back(j); }
  void untrack_job(job* j) { std::erase(live_jobs_, j); }
  std::vector<int> live_pids() const;

  // ---- worker side
  void send_upstream(multipart&& parts);
  /// Worker: exit when the connection to the master stays down (a child that cannot see its
  /// master's process, e.g. in a container).
  void watch_master();
  /// Waits for the master's first answer (welcome or refuse).
  void on_first_message(unique_function<void(std::error_code, multipart)> h);
  /// Worker: blocks (running the loop) until the master sends a service message (pool_task,
  /// pool_stop, mgr_call, mgr_stop); returns it with its header frame first.
  multipart next_service_message();
  /// A service message that came another way (a manager's direct link); on the loop thread.
  void push_service_message(multipart m);

  /// Stops: kills children still running, closes sockets. Idempotent; on the loop thread.
  void shutdown() noexcept;
  /// Shuts down and stops the owned thread; safe from any thread.
  void stop() noexcept;

  /// See fiber::detail::wait_until: with an owned io_context, a blocking caller runs the loop
  /// itself while it waits (no thread hop between the caller and the loop).
  void wait_until(const std::atomic<bool>& done) { drive(nullptr, done); }
  void notify_done(std::atomic<bool>& done) noexcept;
  /// Takes the loop (waiting for it if another thread has it), runs `start` on this thread,
  /// then runs the loop until `done`. Without an owned loop, `start` runs on the loop's thread.
  void drive(unique_function<void()> start, const std::atomic<bool>& done);
  /// Runs `f` on the loop and waits for it.
  void run_sync(unique_function<void()> f);
  /// Runs `f` on the loop without waiting on a loop that nobody may be running: now when this
  /// thread can (the loop's own thread, or an owned loop a caller may drive), else posted to the
  /// caller's io_context. Nothing when the runtime has shut down.
  void run_soon(unique_function<void()> f);

 private:
  struct waiter {
    std::string peer;  // empty: a getter in this process
    std::uint64_t request = 0;
  };
  struct channel_state {
    std::deque<multipart> items;
    std::deque<waiter> waiters;
    bool released = false;
  };
  struct pending_get {
    std::uint64_t channel = 0;
    get_handler handler;
    std::unique_ptr<asio::steady_timer> timer;
    bool cancelling = false;
  };

  void start_master_loop();
  void start_zap();
  void master_loop_step();
  void worker_loop_step();
  void handle_master_message(multipart&& m);
  void handle_worker_message(multipart&& m);
  /// `from_network`: the put came from a peer, so a local reader may resume inline.
  void broker_put(std::uint64_t channel, multipart&& payload, bool from_network);
  void broker_get(std::uint64_t channel, waiter w);
  bool broker_cancel(std::uint64_t channel, const std::string& peer, std::uint64_t request);
  void complete_get(std::uint64_t request, std::error_code ec, multipart&& payload, bool may_run_inline);
  /// False when the reader is gone; `payload` is then left intact.
  bool deliver(const waiter& w, std::uint64_t channel, multipart& payload, bool may_run_inline);
  void configure_socket(zmq::socket_t& s) const;

  role role_;
  fiber::config cfg_;
  std::string job_id_;
  job_keys keys_;
  std::unique_ptr<asio::io_context> owned_io_;
  asio::io_context* io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread standby_;  // master with an owned loop: runs it while no caller does
  zmq::context_t zctx_;

  std::shared_ptr<zmq_channel> router_;    // master: children connect here
  std::shared_ptr<zmq_channel> zap_;       // master: accepts only this job's client key
  std::shared_ptr<zmq_channel> upstream_;  // worker: to the master
  std::unique_ptr<master_watch> master_watch_;
  std::string endpoint_;
  bool plain_auth_ = false;  // listening on a local unix socket with encryption=auto
  std::unique_ptr<backend> backend_;
  std::unordered_map<std::string, std::weak_ptr<child_endpoint>> children_;
  std::vector<job*> live_jobs_;
  std::unordered_map<std::uint64_t, channel_state> channels_;
  std::unordered_map<std::uint64_t, pending_get> gets_;
  std::unordered_map<std::uint64_t, std::weak_ptr<service>> services_;
  std::deque<multipart> service_inbox_;  // worker
  std::atomic<bool> service_arrived_{false};
  std::uint64_t next_request_ = 1;
  std::atomic<std::uint64_t> next_channel_{1};
  std::uint64_t channel_prefix_ = 0;
  unique_function<void(std::error_code, multipart)> first_message_;
  bool shut_down_ = false;

  // blocking callers
  std::mutex wait_mutex_;
  std::condition_variable wait_cv_;     // callers blocked in wait_until
  std::condition_variable standby_cv_;  // the standby thread; signalled only at stop
  bool self_driven_ = false;   // owned loop: whoever blocks runs it
  bool driving_ = false;       // some thread is inside run_one
  bool standby_driving_ = false;
  bool kicked_ = false;        // a wake-up is on its way to the standby's run_one
  bool stopping_ = false;
  int want_to_drive_ = 0;      // callers waiting for the baton
  std::chrono::steady_clock::time_point last_release_{};
  void standby_loop();
  /// io_->run_one(), logging an exception that escapes a handler; false when the loop stopped.
  bool run_one_logged() noexcept;
};

}  // namespace fiber::detail
