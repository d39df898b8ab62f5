// The master's side of a pool: workers pull chunks of tasks; a pending table knows who holds
// what. The wire is in pool/wire.hpp.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <limits>
#include <list>
#include <optional>
#include <typeinfo>

#include "core/message_limit.hpp"
#include "core/remote_failure.hpp"
#include "fiber/pool.hpp"
#include "primitives/pool/master.hpp"
#include "primitives/pool/wire.hpp"
#include "core/log.hpp"
#include "primitives/child_process.hpp"

namespace fiber::detail {

class pool_core final : public service, public std::enable_shared_from_this<pool_core> {
 public:
  pool_core(std::shared_ptr<runtime> rt, pool_options options)
      : rt_(std::move(rt)), options_(std::move(options)), id_(rt_->new_channel_id()) {  // unique among services too
    if (!options_.processes) options_.processes = cpu_count();
    if (*options_.processes < 1)
      throw error(errc::config_error, "pool: processes must be at least 1, got " + std::to_string(*options_.processes) +
                                          "; leave it unset for cpu_count()");
    if (options_.max_attempts < 1) throw error(errc::config_error, "pool: max_attempts must be at least 1");
    if (options_.prefetch < 0) throw error(errc::config_error, "pool: prefetch must be 0 or more");
    if (options_.maxtasksperchild < 0) throw error(errc::config_error, "pool: maxtasksperchild must be 0 or more");
    target_ = *options_.processes;
    worker_needs_ = options_.needs;
  }

  // ---- all below on the loop thread

  void start() {
    rt_->services().add(id_, weak_from_this());
    probe_timer_ = std::make_unique<asio::steady_timer>(rt_->io());
    schedule_probe();
    top_up();
  }

  runtime& rt() { return *rt_; }
  const std::shared_ptr<runtime>& rt_ptr() const { return rt_; }
  bool open() const { return !closed_; }

  void submit(std::uint64_t function_id, std::size_t chunksize, std::size_t hint, std::shared_ptr<pool_sink> sink,
              call_options call) {
    if (closed_) throw error(errc::closed, "pool is closed: no more work can be submitted");
    auto needs = find_meta(function_id);
    if (!worker_needs_.covers(needs)) {
      // Asked before anything changes: work no node can run fails here, and the pool's workers
      // go on as they were.
      auto spec = spec_for_needs(worker_needs_.joined(needs), rt_->cfg());
      spec.name = "a worker of pool " + std::to_string(id_);
      rt_->master().the_backend().check_capacity(spec);
    }
    bool start_again = false;
    if (fatal_) {  // the workers could not start for the work before: try again for this one
      fatal_ = nullptr;
      start_failures_ = 0;
      start_again = true;
    }
    if (chunksize == 0) {
      // As multiprocessing: about four chunks per worker; 1 when the size is unknown.
      auto per = static_cast<std::size_t>(target_) * 4;
      chunksize = hint ? std::max<std::size_t>(1, (hint + per - 1) / per) : 1;
    }
    if (!worker_needs_.covers(needs)) raise_needs(needs);
    feeding_.push_back(
        std::make_shared<submission>(submission{function_id, chunksize, std::move(sink), call.retry, needs}));
    total_hint_ += hint;
    start_progress();
    if (start_again) top_up();  // may fail this submission at once, item by item
    dispatch();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    maybe_stop_workers();
  }

  void terminate() {
    closed_ = true;
    terminating_ = true;
    fail_everything(std::make_exception_ptr(error(errc::closed, "the pool was terminated before this work finished")));
    std::vector<std::shared_ptr<child_process>> procs;
    for (auto& [rid, w] : workers_) procs.push_back(w.proc);
    for (auto& p : procs) p->kill_now();  // each end erases its worker (on_worker_ended)
    probe_timer_->cancel();
    if (progress_timer_) progress_timer_->cancel();
    rt_->services().remove(id_);
    check_joined();
  }

  void resize(int n) {
    if (n < 1) throw error(errc::config_error, "pool: resize needs at least 1 process");
    target_ = n;
    int excess = static_cast<int>(live_workers()) - n;
    for (auto& [rid, w] : workers_) {
      if (excess <= 0) break;
      if (w.leaving) continue;
      retire(w);
      --excess;
    }
    top_up();
    dispatch();
  }

  void when_joined(unique_function<void()> done) {
    joined_waiters_.push_back(std::move(done));
    check_joined();
  }

  void when_ready(unique_function<void()> done) {
    ready_waiters_.push_back(std::move(done));
    check_ready();
  }

  pool_stats stats() const {
    pool_stats s = stats_;
    s.queued = 0;
    for (auto& t : queue_) s.queued += t.count;
    s.running = 0;
    for (auto& [id, t] : inflight_) s.running += t.count;
    s.workers = live_workers();
    return s;
  }

  void pump() { dispatch(); }

  void on_shutdown() noexcept override {
    if (probe_timer_) probe_timer_->cancel();
    if (progress_timer_) progress_timer_->cancel();
  }

  void on_message(const std::string& peer, const header& h, multipart&& payload) override {
    auto it = workers_.find(peer);
    if (it == workers_.end()) return;  // a worker we already gave up on
    auto& w = it->second;
    if (h.type == pool_kind::ready) {
      w.connected = true;
      start_failures_ = 0;
      if (w.leaving) {  // told to leave before it could be reached
        send_stop(w);
        return;
      }
      grant(w, static_cast<int>(h.aux));
      top_up();  // the next start, where starts are limited
      check_ready();
    } else if (h.type == pool_kind::result) {
      on_results(w, h.request, std::move(payload));
      grant(w, static_cast<int>(h.aux));
      if (options_.maxtasksperchild && ++w.completed >= options_.maxtasksperchild) {
        w.leaving = true;  // it exits by itself now; its replacement can start at once
        top_up();
      }
    }
    dispatch();
  }

 private:
  struct submission {
    std::uint64_t function_id;
    std::size_t chunksize;
    std::shared_ptr<pool_sink> sink;
    bool retry = true;
    meta needs;  // of the function: its tasks go only to workers that cover them
    std::size_t next_index = 0;
    std::size_t outstanding = 0;  // items produced and not yet delivered
    bool input_done = false;
    bool finished = false;
  };
  struct task {
    std::uint64_t id = 0;
    std::shared_ptr<submission> sub;
    std::size_t first = 0, count = 0;
    std::shared_ptr<writer> args;  // packed items + large ranges, kept for a resend
    int attempts = 0;
    std::string worker;  // while in flight
  };
  struct worker {
    std::shared_ptr<child_process> proc;
    std::string rid;
    meta needs;  // what it was started with
    bool connected = false;
    bool leaving = false;  // told to stop (close, resize), or retiring (maxtasksperchild)
    int credit = 0;
    int completed = 0;
    std::deque<std::uint64_t> tasks;  // in the order sent, which is the order it runs them
    std::optional<std::chrono::steady_clock::time_point> stopped_since;  // local: seen stopped (SIGSTOP)
  };

  std::size_t live_workers() const {
    std::size_t n = 0;
    for (auto& [rid, w] : workers_)
      if (!w.leaving) ++n;
    return n;
  }

  void grant(worker& w, int credit) { w.credit += credit; }

  // ---- workers

  void top_up() {
    if (closed_ || terminating_ || fatal_ || rt_->is_shut_down()) return;
    auto live = live_workers(), starting = starting_workers();
    const auto limit = start_limit();
    // A worker that cannot be spawned counts towards on_start_failed's limit, which ends this.
    while (static_cast<int>(live) < target_ && starting < limit && !fatal_) {
      if (start_worker()) {
        ++live;
        ++starting;
      }
    }
  }

  /// Local children start at most this many at a time: thousands started at once on a few cores
  /// missed their handshake deadline (2,048 on 2 cores: 88 killed by start_timeout_ms). The next
  /// start follows each handshake. An engine that queues (docker, slurm) takes every request.
  std::size_t start_limit() {
    if (rt_->master().the_backend().name() != "local") return std::numeric_limits<std::size_t>::max();
    return static_cast<std::size_t>(std::max(16, 4 * cpu_count()));
  }
  std::size_t starting_workers() const {
    std::size_t n = 0;
    for (auto& [rid, w] : workers_)
      if (!w.connected && !w.leaving) ++n;
    return n;
  }

  /// Workers started with less than `needs` finish what they hold and are replaced.
  void raise_needs(const meta& needs) {
    worker_needs_ = worker_needs_.joined(needs);
    logf(log_level::info, "pool ", id_, ": a function needs cpu=", needs.cpu, " memory_mb=", needs.memory_mb,
         " gpu=", needs.gpu, "; replacing workers started with less");
    for (auto& [rid, w] : workers_)
      if (!w.leaving && !w.needs.covers(worker_needs_)) retire(w);
    top_up();
  }

  /// False when the worker could not even be spawned (on_start_failed counted it).
  bool start_worker() {
    encoded_call call;
    const auto& entry = require_registered(&pool_worker_main);
    call.function_id = entry.id;
    call.function_name = entry.name;
    std::uint64_t init_id = 0;
    std::vector<std::string> init_frames;
    if (options_.initializer) {
      auto& init = options_.initializer->call;
      init_id = init.function_id;
      init_frames.push_back(init.args.head());
      for (auto& b : init.args.blobs()) init_frames.emplace_back(reinterpret_cast<const char*>(b.data), b.size);
    }
    call.args.value(std::make_tuple(id_, options_.prefetch + 1, options_.maxtasksperchild, init_id, init_frames));
    auto proc = child_process::make(rt_, std::move(call));
    proc->set_name("PoolWorker-" + std::to_string(id_) + "-" + std::to_string(++started_));
    proc->set_needs(worker_needs_);
    proc->set_owned();
    unique_function<void(std::error_code, std::string)> done = [weak = weak_from_this(), proc](std::error_code ec,
                                                                                             std::string what) {
      auto self = weak.lock();
      if (!self || !ec) return;
      self->on_start_failed(ec, what, proc->exit_code());
    };
    try {
      proc->start(done);
    } catch (const error& e) {
      on_start_failed(e.code(), e.reason());
      return false;
    }
    auto rid = proc->peer();
    worker w;
    w.proc = proc;
    w.rid = rid;
    w.needs = worker_needs_;
    workers_.emplace(rid, std::move(w));
    proc->when_ended([weak = weak_from_this(), rid] {
      if (auto self = weak.lock()) self->on_worker_ended(rid);
    });
    return true;
  }

  /// A worker killed from outside (SIGKILL, SIGTERM, SIGINT, SIGHUP) before its handshake says
  /// nothing about the next one: it is replaced like any lost worker.
  static bool killed_from_outside(std::optional<int> exit_code) {
    return exit_code && (*exit_code == -SIGKILL || *exit_code == -SIGTERM || *exit_code == -SIGINT ||
                         *exit_code == -SIGHUP);
  }

  void on_start_failed(std::error_code ec, const std::string& what, std::optional<int> exit_code = std::nullopt) {
    if (killed_from_outside(exit_code)) return;  // on_worker_ended starts its replacement
    // A worker that cannot start (binary mismatch, missing executable, an error before its
    // handshake) will not start next time either: fail the work at hand instead of trying
    // forever. New work tries again (submit).
    // A request no node can meet is not met by the next worker either: fail at once.
    bool hopeless = ec == make_error_code(errc::unsatisfiable);
    if (++start_failures_ < max_start_failures && !hopeless) {
      logf(log_level::warn, "a pool worker could not start (", start_failures_, " in a row): ", what);
      return;
    }
    fatal_ = std::make_exception_ptr(error(ec, "pool workers cannot start: " + what));
    fail_everything(fatal_);
  }

  void on_worker_ended(const std::string& rid) {
    auto it = workers_.find(rid);
    if (it == workers_.end()) return;
    auto w = std::move(it->second);
    workers_.erase(it);
    bool lost = !w.leaving && !terminating_ && !rt_->is_shut_down();
    if (lost || (!w.tasks.empty() && !rt_->is_shut_down())) {
      auto code = w.proc->exit_code().value_or(0);
      // In items, as stats().retried counts them: a task is a chunk of items.
      std::size_t items = 0;
      for (auto tid : w.tasks)
        if (auto t = inflight_.find(tid); t != inflight_.end()) items += t->second.count;
      logf(log_level::warn, w.proc->name(), " (pid ", w.proc->pid(), ") ended with code ", code, " holding ", items,
           " item(s) in ", w.tasks.size(), " chunk(s)");
      if (lost && w.connected) ++stats_.workers_lost;
    }
    // The oldest task it held is the one it was running: only that one is charged an attempt;
    // the others were waiting behind it (prefetch) and go back as they were.
    bool first = true;
    std::vector<task> requeued;
    for (auto tid : w.tasks) {
      auto t = inflight_.find(tid);
      if (t == inflight_.end()) continue;
      auto tk = std::move(t->second);
      inflight_.erase(t);
      if (std::exchange(first, false)) ++tk.attempts;
      bool retry = options_.retry && tk.sub->retry;
      if (tk.attempts > 0 && (!retry || tk.attempts >= options_.max_attempts)) {
        auto why = std::make_exception_ptr(
            error(errc::worker_lost, "a task was running on " + w.proc->name() + " when it died (" +
                                         std::to_string(tk.attempts) + " worker(s) lost running it" +
                                         (retry ? "; max_attempts reached)" : "; retries are off)")));
        for (std::size_t i = 0; i < tk.count; ++i) deliver_error(*tk.sub, tk.first + i, why);
        continue;
      }
      stats_.retried += tk.count;
      tk.worker.clear();
      requeued.push_back(std::move(tk));
    }
    // Back at the front of the queue, in their original order.
    for (auto it = requeued.rbegin(); it != requeued.rend(); ++it) queue_.push_front(std::move(*it));
    top_up();
    dispatch();
    check_joined();
  }

  void retire(worker& w) {
    w.leaving = true;
    if (w.connected) send_stop(w);  // else when it connects (pool_ready)
  }

  void send_stop(worker& w) {
    rt_->master().send_to_child(w.rid, make_message(pool_kind::stop, {.channel = id_}));
  }

  void maybe_stop_workers() {
    if (!closed_ || !queue_.empty() || !inflight_.empty()) return;
    for (auto& f : feeding_)
      if (!f->input_done) return;
    for (auto& [rid, w] : workers_)
      if (!w.leaving) retire(w);
    check_joined();
  }

  void check_joined() {
    if (!closed_ || !workers_.empty()) return;
    auto waiters = std::move(joined_waiters_);
    joined_waiters_.clear();
    for (auto& f : waiters) f();
  }

  void check_ready() {
    std::size_t connected = 0;
    for (auto& [rid, w] : workers_)
      if (w.connected && !w.leaving) ++connected;
    if (connected < static_cast<std::size_t>(target_) && !fatal_ && !closed_) return;
    auto waiters = std::move(ready_waiters_);
    ready_waiters_.clear();
    for (auto& f : waiters) f();
  }

  // ---- the progress line (opt-in, and only when stderr is a terminal)

  bool busy() const { return !queue_.empty() || !inflight_.empty() || !feeding_.empty(); }

  void start_progress() {
    if (!options_.progress || progress_timer_ || !::isatty(STDERR_FILENO)) return;
    progress_timer_ = std::make_unique<asio::steady_timer>(rt_->io());
    tick_progress();
  }

  void tick_progress() {
    progress_timer_->expires_after(std::chrono::milliseconds(200));
    progress_timer_->async_wait([weak = weak_from_this()](std::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || self->rt_->is_shut_down()) return;
      auto st = self->stats();
      std::string total = self->total_hint_ ? " of " + std::to_string(self->total_hint_) : std::string();
      std::fprintf(stderr, "\r[fiber pool] %zu%s done, %zu running, %zu queued, %zu workers, %zu lost\033[K",
                   st.done, total.c_str(), st.running, st.queued, st.workers, st.workers_lost);
      if (self->busy()) {
        self->tick_progress();
      } else {
        std::fputc('\n', stderr);
        self->progress_timer_.reset();
        self->total_hint_ = 0;
      }
    });
  }

  // A stopped worker (SIGSTOP) keeps its process but not its connection: ZeroMQ's heartbeat
  // drops it, and then a message to it cannot be routed. Probe every heartbeat interval the
  // workers that hold tasks; an idle one meets the same check when it is next sent a task
  // (dispatch), so an idle pool sends nothing.
  void schedule_probe() {
    probe_timer_->expires_after(std::chrono::milliseconds(rt_->cfg().heartbeat_interval_ms));
    probe_timer_->async_wait([weak = weak_from_this()](std::error_code ec) {
      auto self = weak.lock();
      // After the context stopped nothing is left to watch, and a caller's io_context must be
      // able to run out of work.
      if (ec || !self || self->rt_->is_shut_down()) return;
      bool by_state = !self->rt_->master().heartbeats();
      auto now = std::chrono::steady_clock::now();
      auto patience = std::chrono::milliseconds(self->rt_->cfg().heartbeat_timeout_ms);
      for (auto& [rid, w] : self->workers_) {
        if (!w.connected || w.tasks.empty()) {
          w.stopped_since.reset();
          continue;
        }
        if (by_state) {
          // No heartbeats on this host's unix sockets: the kernel says whether it is stopped.
          if (!w.proc->is_stopped()) {
            w.stopped_since.reset();
          } else if (!w.stopped_since) {
            w.stopped_since = now;
          } else if (now - *w.stopped_since >= patience) {
            logf(log_level::warn, w.proc->name(), " has been stopped for heartbeat_timeout_ms holding tasks; killing it");
            w.proc->signal(SIGKILL);
          }
          continue;
        }
        if (auto err = self->rt_->master().try_send_to_child(rid, make_message(kind::probe, {.channel = self->id_}))) {
          logf(log_level::warn, w.proc->name(), " stopped answering (", err.message(), "); killing it");
          w.proc->signal(SIGKILL);
        }
      }
      self->schedule_probe();
    });
  }

  // ---- work

  void feed() {
    std::size_t window = static_cast<std::size_t>(std::max(1, target_)) * (options_.prefetch + 1) * 2;
    for (auto it = feeding_.begin(); it != feeding_.end() && queue_.size() < window;) {
      auto sub = *it;
      if (sub->input_done || !sub->sink->wants_more()) {
        ++it;
        continue;
      }
      writer chunk;
      auto count = sub->sink->next_items(sub->chunksize, chunk);
      if (!count) {
        sub->input_done = true;
        finish_if_done(*sub);
        continue;
      }
      if (auto over = message_limit_text("the arguments of a chunk", chunk.total_size(), rt_->cfg().max_message_bytes,
                                         "use a smaller chunksize");
          !over.empty()) {
        // A worker would drop the connection rather than take it: fail these items here.
        auto why = std::make_exception_ptr(error(errc::message_too_large, over));
        auto first = sub->next_index;
        sub->next_index += count;
        sub->outstanding += count;
        for (std::size_t i = 0; i < count; ++i) deliver_error(*sub, first + i, why);
        continue;
      }
      task t;
      t.id = next_task_++;
      t.sub = sub;
      t.first = sub->next_index;
      t.count = count;
      sub->next_index += count;
      sub->outstanding += count;
      t.args = std::make_shared<writer>(std::move(chunk));
      queue_.push_back(std::move(t));
    }
    std::erase_if(feeding_, [](auto& s) { return s->input_done; });
  }

  /// The worker with credit, and the needs of `t`, that holds the fewest tasks: chunks spread
  /// over the pool.
  worker* least_loaded(const task& t) {
    worker* best = nullptr;
    for (auto& [rid, w] : workers_)
      if (!w.leaving && w.credit > 0 && w.needs.covers(t.sub->needs) && (!best || w.tasks.size() < best->tasks.size()))
        best = &w;
    return best;
  }

  void dispatch() {
    feed();
    while (!queue_.empty()) {
      auto* best = least_loaded(queue_.front());
      if (!best) break;
      auto& w = *best;
      auto rid = w.rid;
      auto t = std::move(queue_.front());
      queue_.pop_front();
      if (t.sub->finished) continue;  // its caller already has an error
      // The frames reference the task's arguments: kept for a resend, never copied.
      auto m = make_message(pool_kind::task, {.channel = id_, .request = t.id, .aux = static_cast<std::uint32_t>(t.count)},
                            as_pod(t.sub->function_id), to_shared_frames(t.args));
      if (auto ec = rt_->master().try_send_to_child(rid, std::move(m))) {
        queue_.push_front(std::move(t));
        w.credit = 0;
        if (!w.leaving) {
          // Unreachable (its connection dropped: stopped, or going): its end replaces it.
          logf(log_level::warn, w.proc->name(), " cannot be reached (", ec.message(), "); killing it");
          w.proc->signal(SIGKILL);
        }
        continue;
      }
      --w.credit;
      w.tasks.push_back(t.id);
      t.worker = rid;
      inflight_.emplace(t.id, std::move(t));
      feed();
    }
    maybe_stop_workers();
  }

  void on_results(worker& w, std::uint64_t task_id, multipart&& payload) {
    std::erase(w.tasks, task_id);
    auto it = inflight_.find(task_id);
    if (it == inflight_.end() || it->second.worker != w.rid) return;  // a duplicate: first result won
    auto t = std::move(it->second);
    inflight_.erase(it);
    try {
      if (payload.empty()) throw error(errc::malformed_message, "malformed pool result: no frames");
      auto shared = std::make_shared<multipart>(std::move(payload));
      auto items = unpack(*shared, 0, t.count, true);
      for (std::size_t i = 0; i < t.count; ++i) {
        auto& it = items[i];
        if (it.status == item_value) {
          auto f = std::make_shared<message::frames>();
          f->parts = shared;
          f->head = it.head;
          f->blob_spans = std::move(it.blobs);
          deliver_result(*t.sub, t.first + i, message(std::move(f)));
        } else {
          auto f = remote_failure::decode(
              std::string_view(reinterpret_cast<const char*>(it.head.data()), it.head.size()));
          if (f.where.empty()) f.where = w.proc->name();
          deliver_error(*t.sub, t.first + i, f.exception());
        }
      }
    } catch (const std::exception&) {
      auto e = std::current_exception();
      for (std::size_t i = 0; i < t.count; ++i) deliver_error(*t.sub, t.first + i, e);
    }
  }

  void deliver_result(submission& sub, std::size_t index, message m) {
    ++stats_.done;
    --sub.outstanding;
    if (!sub.finished) sub.sink->on_result(index, std::move(m));
    finish_if_done(sub);
  }
  void deliver_error(submission& sub, std::size_t index, std::exception_ptr e) {
    ++stats_.done;
    --sub.outstanding;
    if (!sub.finished) sub.sink->on_error(index, e);
    finish_if_done(sub);
  }
  void finish_if_done(submission& sub) {
    if (sub.finished || !sub.input_done || sub.outstanding) return;
    sub.finished = true;
    sub.sink->on_finished();
  }

  /// Every item not yet delivered fails with `e` at its own position: those in tasks queued or
  /// running, and (through the sink) those the input has not produced yet.
  void fail_everything(std::exception_ptr e) {
    std::vector<std::shared_ptr<submission>> subs(feeding_.begin(), feeding_.end());
    auto fail_task = [&](task& t) {
      subs.push_back(t.sub);
      for (std::size_t i = 0; i < t.count; ++i) deliver_error(*t.sub, t.first + i, e);
    };
    auto queued = std::move(queue_);
    auto inflight = std::move(inflight_);
    queue_.clear();
    inflight_.clear();
    feeding_.clear();
    for (auto& [rid, w] : workers_) w.tasks.clear();
    for (auto& t : queued) fail_task(t);
    for (auto& [id, t] : inflight) fail_task(t);
    for (auto& s : subs) {
      if (s->finished) continue;
      s->finished = true;
      if (!s->input_done) s->sink->on_input_failed(s->next_index, e);
      s->sink->on_finished();
    }
    check_ready();
  }

  std::shared_ptr<runtime> rt_;
  pool_options options_;
  std::uint64_t id_;
  int target_ = 0;
  meta worker_needs_;  // what new workers start with
  int started_ = 0;
  int start_failures_ = 0;  // in a row, not counting workers killed from outside
  static constexpr int max_start_failures = 3;
  bool closed_ = false, terminating_ = false;
  std::exception_ptr fatal_;
  std::map<std::string, worker> workers_;
  std::deque<task> queue_;
  std::map<std::uint64_t, task> inflight_;
  std::list<std::shared_ptr<submission>> feeding_;
  std::uint64_t next_task_ = 1;
  pool_stats stats_;
  std::unique_ptr<asio::steady_timer> probe_timer_, progress_timer_;
  std::size_t total_hint_ = 0;
  std::vector<unique_function<void()>> joined_waiters_, ready_waiters_;
};

// ---- the non-template API -------------------------------------------------------------------

std::shared_ptr<pool_core> make_pool_core(std::shared_ptr<runtime> rt, pool_options options) {
  auto core = std::make_shared<pool_core>(rt, std::move(options));
  // With the caller's io_context the loop may not run yet: the workers start once it does.
  rt->run_soon([core] { core->start(); });
  return core;
}

void pool_submit(const std::shared_ptr<pool_core>& core, std::uint64_t function_id, std::size_t chunksize,
                 std::size_t size_hint, std::shared_ptr<pool_sink> sink, call_options options) {
  core->submit(function_id, chunksize, size_hint, std::move(sink), options);
}

void pool_on_loop(const std::shared_ptr<pool_core>& core, unique_function<void(pool_core&)> f) {
  core->rt().run_sync([&] { f(*core); });
}

void pool_check_open(const pool_core& core) {
  if (!core.open()) throw error(errc::closed, "pool is closed: no more work can be submitted");
}
void pool_pump(pool_core& core) { core.pump(); }
std::shared_ptr<runtime> pool_runtime(const pool_core& core) { return core.rt_ptr(); }

}  // namespace fiber::detail

namespace fiber::detail {

void pool_close(pool_core& core) { core.close(); }
void pool_terminate(pool_core& core) { core.terminate(); }
void pool_terminate_soon(const std::shared_ptr<pool_core>& core) {
  core->rt().run_soon([core] { core->terminate(); });
}
bool pool_is_open(const pool_core& core) { return core.open(); }
void pool_when_joined(pool_core& core, unique_function<void()> done) { core.when_joined(std::move(done)); }
void pool_when_ready(pool_core& core, unique_function<void()> done) { core.when_ready(std::move(done)); }
void pool_resize(pool_core& core, int processes) { core.resize(processes); }
pool_stats pool_stats_of(const pool_core& core) { return core.stats(); }

}  // namespace fiber::detail
