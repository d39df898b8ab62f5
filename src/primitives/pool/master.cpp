#include "primitives/pool/master.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <asio/post.hpp>
#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>
#include <csignal>
#include <cstring>
#include <utility>

#include "backend/backend.hpp"
#include "core/flight_recorder.hpp"
#include "core/log.hpp"
#include "fiber/error.hpp"
#include "fiber/registry.hpp"
#include "primitives/child_process.hpp"
#include "primitives/durable/durable_run.hpp"
#include "primitives/pool/wire.hpp"
#include "primitives/pool/worker_reattach.hpp"
#include "runtime/runtime.hpp"
#include "transport/shared_frames.hpp"

namespace fiber::detail {

namespace {
std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an unknown error";
  }
}

std::uint16_t estimate_seconds(std::chrono::milliseconds estimate) {
  return static_cast<std::uint16_t>(std::min<std::int64_t>((estimate.count() + 999) / 1000, 65535));
}

}  // namespace

std::shared_ptr<pool_core> pool_core::make(const std::shared_ptr<runtime>& rt, pool_options options) {
  auto core = std::make_shared<pool_master>(rt, std::move(options));
  // With the caller's io_context the loop may not run yet: the workers start once it does.
  rt->run_soon([core] { core->start(); });
  return core;
}

namespace {
pool_options checked(pool_options options) {
  if (!options.processes) options.processes = cpu_count();
  if (*options.processes < 1)
    throw error(errc::config_error, "pool: processes must be at least 1, got " + std::to_string(*options.processes) +
                                        "; leave it unset for cpu_count()");
  if (options.max_attempts < 1) throw error(errc::config_error, "pool: max_attempts must be at least 1");
  if (options.prefetch < 0) throw error(errc::config_error, "pool: prefetch must be 0 or more");
  if (options.maxtasksperchild < 0) throw error(errc::config_error, "pool: maxtasksperchild must be 0 or more");
  if (options.report_interval.count() < 0)
    throw error(errc::config_error, "pool: report_interval must be 0 (after every item) or more");
  if (options.task_estimate.count() < 0)
    throw error(errc::config_error, "pool: task_estimate must be 0 (learned) or more, got " +
                                        std::to_string(options.task_estimate.count()) + " ms");
  if (options.task_timeout.count() < 0)
    throw error(errc::config_error, "pool: task_timeout must be 0 (no limit) or more, got " +
                                        std::to_string(options.task_timeout.count()) + " ms");
  return options;
}
}  // namespace

pool_master::pool_master(std::shared_ptr<runtime> rt, pool_options options)
    : rt_(std::move(rt)),
      options_(checked(std::move(options))),
      id_(rt_->new_channel_id()),  // unique among services too
      workers_(*rt_, id_, options_,
               {.ended = [this](const pool_worker& w) { on_worker_ended(w); },
                .cannot_start =
                    [this](const std::exception_ptr& e) {
                      view_.note_failure("workers cannot start: " + what_of(e));
                      fail_all(e);
                    },
                .raised_needs_refused =
                    [this](const std::exception_ptr& e) {
                      // The work of the calls the workers no longer cover fails: no task of
                      // theirs was ever sent, since no worker covered them.
                      (void)tasks_.fail_where([this](const pool_submission& s) { return !workers_.needs().covers(s.needs); },
                                              e);
                      milestones_.check();
                      dispatch();
                    }}),
      directory_(*rt_, workers_),
      courier_(id_, directory_,
               [this](const shared_entry& e) {
                 // When its last handle here goes, the workers that got it are told to let it go.
                 e.on_release([weak = weak_from_this(), rt = std::weak_ptr<runtime>(rt_)](std::uint64_t id) {
                   if (auto r = rt.lock())
                     asio::post(r->loop().executor(), [weak, id] {
                       if (auto self = weak.lock()) self->courier_.released(id);
                     });
                 });
               }),
      late_(*rt_, id_, options_, tasks_, workers_, view_, [this] { dispatch(); }),
      outside_(std::max<std::size_t>(16, 2 * static_cast<std::size_t>(std::max(1, options_.processes.value_or(8)))),
               std::chrono::milliseconds(rt_->cfg().outside_deaths_ms)),
      progress_(options_.progress, [this] { return progress_frame(); }),
      upstream_(rt_->io(), std::chrono::milliseconds(std::max(10, rt_->cfg().dashboard_interval_ms)),
                [rt = rt_.get(), id = id_](std::string_view state, bool ended) {
                  rt->observer().show_pool_upstream(id, state, ended);
                }) {}

pool_master::~pool_master() { rt_->observer().recorder().record(record_kind::pool_end, 0, id_); }

namespace {
// A master holds about two descriptors per worker (its connection, and on this host its pidfd;
// envelope_bench): a pool that cannot have them fails its starts with "Too many open files".
// Said at once, with the fix, rather than after the first few hundred workers.
void check_open_files(int workers) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return;
  auto need = static_cast<rlim_t>(workers) * 2 + 64;
  if (need > r.rlim_cur)
    logf(log_level::warn, "a pool of ", workers, " workers needs about ", need, " open files in this process, and its limit is ",
         r.rlim_cur, " (hard limit ", r.rlim_max, "): raise it (ulimit -n ", need, ", or setrlimit(RLIMIT_NOFILE) in main)");
}
}  // namespace

void pool_master::start() {
  rt_->services().add(id_, weak_from_this());
  check_open_files(workers_.count().target);
  try {
    rt_->master().listen();  // how children reach this master says whether they share its memory
    courier_.in_host_memory(rt_->master().links().children_on_this_host());
  } catch (const std::exception&) {
    // No backend to listen for (an engine that does not answer): the workers' start says so.
  }
  tasks_.feeder().shared_limits(rt_->cfg().shared_cache_bytes, courier_.in_host_memory());
  // A call's end in the recording: its span in a trace, from its submission to its last result.
  tasks_.feeder().on_end([this](const pool_submission& sub) {
    rt_->observer().recorder().record(record_kind::map_end, 0, id_, sub.recorded_as);
    if (calls_open_ && --calls_open_ == 0) busy_ = {};
  });
  bool resumed = false;
  try {
    // Numbered here, on the loop in the order the program made its pools.
    if (auto* run = durable_run::of(*rt_)) {
      durable_ = std::make_unique<durable_maps>(run->maps(), run->next_pool(), [run] { run->appended(); });
      tasks_.feeder().journal(durable_.get());
      resumed = run->resumed();
      if (workers_wait_for_next_master(rt_->cfg())) {
        // Workers hold their results until the journal on disk does.
        acks_ = std::make_shared<journal_acks>([this](const std::string& rid, std::uint64_t task, bool old) {
          (void)rt_->master().try_send_to_child(
              rid, make_message(pool_kind::journaled, {.channel = id_, .request = task, .aux = old ? 1u : 0u}));
        });
        run->watch([acks = acks_.get()](std::uint64_t upto) { acks->durable(upto); }, acks_);
      }
    }
  } catch (const std::exception&) {
    durable_failed_ = std::current_exception();
  }
  rt_->observer().recorder().record(record_kind::pool_begin, static_cast<std::uint32_t>(workers_.count().target), id_);
  if (auto* board = rt_->observer().run_dashboard()) {
    board->view().add_pool(id_, [weak = weak_from_this()](bool rows) -> std::optional<boost::json::object> {
      if (auto self = weak.lock()) return self->describe(rows);
      return std::nullopt;
    });
  } else if (rt_->observer().shows_pools_upstream()) {
    upstream_.start(weak_from_this(), [this] { return describe(); });
  }
  // A run taken up: the last master's workers that waited for this one are its first.
  workers_.start(weak_from_this(), [this, resumed] {
    if (resumed) take_up_workers(*rt_, *durable_, id_, workers_, reattached_.claims());
  });
}

// ---- from any thread

void pool_master::check_open() const {
  if (closed_) throw error(errc::closed, "pool is closed: no more work can be submitted");
}

void pool_master::on_loop(unique_function<void(pool_core&)> f) {
  rt_->loop().run_sync([&] { f(*this); });
}

void pool_master::terminate_soon() {
  rt_->run_soon([self = shared_from_this()] { self->terminate(); });
}

// ---- on the loop thread

void pool_master::submit(std::uint64_t function_id, std::size_t chunksize, std::size_t hint,
                         std::shared_ptr<pool_sink> sink, call_options call) {
  check_open();
  auto timeout = call.task_timeout.value_or(options_.task_timeout);
  if (timeout.count() < 0)
    throw error(errc::config_error, "pool.with: task_timeout must be 0 (no limit) or more, got " +
                                        std::to_string(timeout.count()) + " ms");
  auto estimate = call.task_estimate.value_or(options_.task_estimate);
  if (estimate.count() < 0)
    throw error(errc::config_error, "pool.with: task_estimate must be 0 (learned) or more, got " +
                                        std::to_string(estimate.count()) + " ms");
  auto needs = find_meta(function_id);
  if (!workers_.needs().covers(needs)) workers_.check_capacity(needs);
  // The workers could not start for the work before: they try again for this one.
  bool start_again = workers_.starter().try_again();
  std::size_t grow_to = 0;
  if (chunksize == 0) {
    // As multiprocessing: about four chunks per worker. A stream keeps under its limit. When
    // the size is unknown, chunks start at 1 and double up to that limit (or 1024): the first
    // results come at once, and a long input is not sent one item a message.
    auto per = static_cast<std::size_t>(workers_.count().target) * 4;
    auto limit = sink->chunk_limit();
    chunksize = hint ? std::max<std::size_t>(1, (hint + per - 1) / per) : 1;
    if (limit) chunksize = std::min(chunksize, limit);
    if (!hint) grow_to = limit ? limit : 1024;
  }
  if (!workers_.needs().covers(needs)) workers_.raise_needs(needs);
  if (durable_failed_) std::rethrow_exception(durable_failed_);
  auto sub = std::make_shared<pool_submission>(pool_submission{function_id, chunksize, std::move(sink), call.retry, needs});
  sub->grow_to = grow_to;
  sub->timeout = timeout;
  sub->retry_timed_out = call.retry_timed_out.value_or(options_.retry_timed_out);
  sub->estimate = estimate;
  if (timeout.count()) late_.use();
  sub->recorded_as = ++maps_;
  // Not on a caller's io_context: a timer of fiber's would hold its run() up (see idle_trim).
  // Looked up once (Asio's service registry takes a lock): a loop of small maps starts a call
  // each round.
  if (!trim_) trim_ = &idle_trim::of(rt_->io(), std::chrono::milliseconds(rt_->loop().owns_loop() ? rt_->cfg().idle_trim_ms : 0));
  if (calls_open_++ == 0) busy_ = trim_->busy();
  rt_->observer().recorder().record(record_kind::map_begin, 0, id_, sub->recorded_as, hint);
  if (durable_) {
    auto* f = find_function(function_id);
    durable_->begin(*sub, f ? std::string_view(f->name) : std::string_view("an unregistered function"));
  }
  tasks_.feeder().add(std::move(sub));
  total_hint_ += hint;
  progress_.start(rt_->io(), weak_from_this());
  if (start_again) workers_.top_up();  // may fail this submission at once, item by item
  dispatch();
}

void pool_master::close() {
  if (closed_) return;
  closed_ = true;
  workers_.close();
  maybe_stop_workers();
}

void pool_master::terminate() {
  closed_ = true;
  terminating_ = true;
  fail_all(std::make_exception_ptr(error(errc::closed, "the pool was terminated before this work finished")));
  workers_.kill_all();
  progress_.cancel();
  upstream_.show();  // its state at its end: the last the run's page gets
  late_.cancel();
  rt_->services().remove(id_);
  milestones_.check();
}

void pool_master::resize(int n) {
  if (n < 1) throw error(errc::config_error, "pool: resize needs at least 1 process");
  workers_.resize(n);
  dispatch();
}

void pool_master::cancel(pool_sink& sink) {
  auto stopped = tasks_.cancel(sink, std::make_exception_ptr(error(
                                         errc::cancelled, "the call was cancelled: its queued items were dropped and "
                                                          "its running ones stopped")));
  // A worker running one of them is killed (a C++ function cannot be stopped otherwise) and
  // replaced; what it held behind it goes back to the queue. One that only holds one of them
  // behind another runs it, and its result is dropped.
  std::vector<const pool_worker*> running;
  workers_.for_each([&](const pool_worker& w) {
    if (!w.tasks.empty() && std::find(stopped.begin(), stopped.end(), w.tasks.front()) != stopped.end()) running.push_back(&w);
  });
  for (auto* w : running) {
    auto held = workers_.load().take_tasks(*w);
    std::deque<std::uint64_t> behind(held.begin() + 1, held.end());
    tasks_.put_back_held(behind);
    workers_.end_now(*w, "killed: the call it ran was cancelled");
  }
  dispatch();
}

void pool_master::when_joined(unique_function<void()> done) { milestones_.when_joined(std::move(done)); }

void pool_master::when_ready(unique_function<void()> done) { milestones_.when_ready(std::move(done)); }

pool_stats pool_master::stats() const {
  pool_stats s;
  s.queued = tasks_.queued_items();
  s.running = tasks_.running_items();
  s.done = tasks_.done();
  s.retried = tasks_.losses().retried();
  s.workers_lost = ends_.lost();
  s.drained = ends_.drained();
  s.memory_exceeded = ends_.memory_exceeded();
  auto census = workers_.count();  // a walk of every worker: once
  s.workers = census.live;
  s.workers_started = census.started;
  s.shared_objects_sent = courier_.objects_sent();
  s.shared_bytes_sent = courier_.bytes_sent();
  s.shared_bytes_host = courier_.bytes_in_host_memory();
  return s;
}

boost::json::object pool_master::describe(bool rows) const {
  return view_.describe(id_, terminating_ ? "terminating" : closed_ ? "closed" : "open", stats(),
                        const_cast<worker_set&>(workers_), tasks_, rows);
}

void pool_master::on_shutdown() noexcept {
  workers_.cancel_timers();
  if (trim_) trim_->stop();  // its timer must not hold the loop up
  progress_.cancel();
  late_.cancel();
  // The context stops with work in flight (a service stopped mid-request): every caller gets an
  // error now rather than waiting for ever; the workers end with the context's children.
  try {
    fail_all(std::make_exception_ptr(
        error(errc::cancelled, "the fiber context was stopped (context::stop) before this work finished")));
  } catch (const std::exception& e) {
    logf(log_level::error, "failing a pool's work at its context's stop: ", e.what());
  }
}

void pool_master::on_message(const std::string& peer, const header& h, multipart&& payload) {
  auto* w = workers_.find(peer);
  if (!w) return;  // a worker we already gave up on
  if (h.type == pool_kind::reattach_at) {
    // Where a master taking the run up finds this worker (bounded: the journal keeps it).
    if (auto* job = w->proc->running_job(); durable_ && job && payload.size() == 2 && payload[0].size() <= 128 &&
                                              payload[1].size() <= 128)
      durable_->worker(w->proc->pid(), payload[0].to_string(), payload[1].to_string(), job->handle());
    return;
  }
  if ((h.type == pool_kind::partial || h.type == pool_kind::result) && reattached_.on_results(*w, h, payload)) {
    dispatch();
    return;
  }
  if (h.type == pool_kind::draining) {
    workers_.retire(*w, /*drained=*/true);
    return dispatch();
  }
  if (h.type == pool_kind::ready) {
    reattached_.ready(*w);
    auto name = w->recorded_as;
    if (!name) {
      name = rt_->observer().recorder().name(w->proc->name());
      rt_->observer().recorder().record(record_kind::worker_up, name, id_, static_cast<std::uint64_t>(w->proc->pid()));
    }
    if (!workers_.on_ready(*w, static_cast<int>(h.aux), name)) return;
    milestones_.check();
  } else if (h.type == pool_kind::partial) {
    workers_.load().reported(*w, h.aux, late_.now());  // items reported one by one (a chunk resent after a death)
    tasks_.on_results(h.request, w->rid, w->proc->name(), std::move(payload), false, h.aux);
    late_.started(*w);
    outside_.on_progress();
  } else if (h.type == pool_kind::hosted) {
    if ((payload.size() == 1 || payload.size() == 2) && payload[0].size() == sizeof(hosted_at)) {
      hosted_at at;
      std::memcpy(&at, payload[0].data(), sizeof at);
      courier_.on_hosted(worker_directory::describe(*w), at, payload.size() == 2 ? payload[1].to_string() : std::string());
    }
    return;
  } else if (h.type == pool_kind::need) {
    if (payload.size() == 1 && payload[0].size() == sizeof(std::uint64_t)) {
      std::uint64_t id;
      std::memcpy(&id, payload[0].data(), sizeof id);
      courier_.on_need(worker_directory::describe(*w), id);
    }
    return;
  } else if (h.type == pool_kind::result) {
    rt_->observer().recorder().record(record_kind::task_done, w->recorded_as, id_, h.request, ran_us_of_result(h.aux) * 1000);
    auto* t = tasks_.in_flight(h.request);
    workers_.finished(*w, h.request, t ? t->count() : 0, credit_of_result(h.aux), late_.now());
    tasks_.on_results(h.request, w->rid, w->proc->name(), std::move(payload));
    if (acks_) acks_->journaled(w->rid, h.request, durable_->journal_end(), !reattached_.claims().holds(w->rid));
    late_.started(*w);
    outside_.on_progress();
  }
  dispatch();
}

void pool_master::dispatch() {
  // Enough chunks waiting to refill every worker's credit twice over.
  auto window = static_cast<std::size_t>(std::max(1, workers_.count().target)) * (options_.prefetch + 1) * 2;
  tasks_.feed(window, rt_->cfg().max_message_bytes);
  while (auto* next = tasks_.next()) {
    if (reattached_.claim_front()) continue;  // a chunk a worker taken up runs already
    auto* w = workers_.load().least_loaded(workers_.needs().full(next->sub->needs), next->alone, next->sub->estimate);
    if (!w) {
      if (time_.short_of_time(*next->sub, std::chrono::steady_clock::now())) continue;  // the call failed
      break;
    }
    auto t = tasks_.take_next();
    task_head head;
    head.function_id = t.sub->function_id;
    head.skip = static_cast<std::uint32_t>(t.begin);
    head.run = static_cast<std::uint32_t>(t.count());
    // Under a timeout, the master must know which item runs and since when.
    head.report_each = t.sub->timeout.count() ? 1 : 0;
    head.careful = t.careful ? 1 : 0;
    head.shares_objects = t.shares_objects ? 1 : 0;
    head.estimate_s = estimate_seconds(t.sub->estimate);
    head.call = static_cast<std::uint32_t>(t.sub->recorded_as);
    head.chunk_first = t.first;
    head.identity = t.identity;
    auto objects = courier_.attach(worker_directory::describe(*w), *t.args);
    head.objects = static_cast<std::uint16_t>(objects.count);
    // The frames reference the task's arguments: kept for a resend, never copied.
    auto m = make_message(pool_kind::task, {.channel = id_, .request = t.id, .aux = static_cast<std::uint32_t>(t.packed)},
                          as_pod(head), std::move(objects.frames), to_shared_frames(t.args));
    // Timed before it leaves: the worker may begin, and its clock run, before this thread goes on.
    auto& recorder = rt_->observer().recorder();
    auto sent_at = recorder.on() ? recorder.now_ns() : 0;
    if (auto ec = rt_->master().try_send_to_child(w->rid, std::move(m))) {
      courier_.undelivered(worker_directory::describe(*w), objects);  // it never got them
      tasks_.put_back(std::move(t));
      workers_.unreachable(*w, ec);
      continue;
    }
    if (recorder.on())
      recorder.record_at(sent_at, record_kind::task_sent, w->recorded_as, id_, t.id, task_sent_items(t.count(), t.sub->recorded_as), {});
    courier_.delivered(objects);
    bool first = workers_.load().took(*w, t.id, t.alone, late_.now());
    tasks_.sent(std::move(t), w->rid);
    if (first) late_.started(*w);
    tasks_.feed(window, rt_->cfg().max_message_bytes);
  }
  if (reattached_.pending()) {
    // Read after this dispatch, not inside it: what they deliver may submit more work.
    asio::post(rt_->loop().executor(), [weak = weak_from_this()] {
      if (auto self = weak.lock()) {
        self->reattached_.read_pending();
        self->dispatch();
      }
    });
  }
  maybe_stop_workers();
}

void pool_master::on_worker_ended(const pool_worker& w) {
  reattached_.forget(w);
  if (acks_) acks_->forget(w.rid);
  courier_.on_worker_ended(worker_directory::describe(w));
  auto [end, bounded] = ends_.ended(w, terminating_ || rt_->is_shut_down());
  bool held = !w.tasks.empty();
  tasks_.on_worker_lost(w.tasks, end, options_.retry, options_.max_attempts, rt_->cfg().retry_memory_exceeded);
  if (held && bounded && outside_.on_death(std::chrono::steady_clock::now()))
    fail_all(outside_.error_after(end.worker, end.how));
  // Closed with work still to do (what the lost worker held, or queued behind it): its
  // replacement finishes it; terminate() failed all work first, so it starts none.
  workers_.top_up(!terminating_ && !tasks_.drained());
  dispatch();
  milestones_.check();
}

void pool_master::fail_all(const std::exception_ptr& e) {
  workers_.for_each([this](const pool_worker& w) { (void)workers_.load().take_tasks(w); });
  tasks_.fail_all(e);
  milestones_.check();
}

void pool_master::maybe_stop_workers() {
  if (!closed_ || !tasks_.drained()) return;
  workers_.retire_all();
  milestones_.check();
}

std::optional<progress_line::frame> pool_master::progress_frame() {
  if (rt_->is_shut_down()) return std::nullopt;
  auto st = stats();
  std::string total = total_hint_ ? " of " + std::to_string(total_hint_) : std::string();
  progress_line::frame f;
  f.text = "[fiber pool] " + std::to_string(st.done) + total + " done, " + std::to_string(st.running) + " running, " +
           std::to_string(st.queued) + " queued, " + std::to_string(st.workers) + " workers, " +
           std::to_string(st.workers_lost) + " lost";
  f.last = !tasks_.busy();
  if (f.last) total_hint_ = 0;
  return f;
}

}  // namespace fiber::detail
