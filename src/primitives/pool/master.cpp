#include "primitives/pool/master.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <asio/post.hpp>
#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>
#include <csignal>
#include <cstring>

#include "core/flight_recorder.hpp"
#include "core/log.hpp"
#include "fiber/error.hpp"
#include "primitives/child_process.hpp"
#include "primitives/pool/wire.hpp"
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

std::string how_it_ended(const pool_worker& w) {
  auto code = w.proc->exit_code();
  std::string status = code ? exit_text(*code) : "";
  if (w.why_ended.empty()) return status.empty() ? "its end was reported without a status" : status;
  // The pool ended it with SIGKILL; another status means it had ended by itself first (a
  // container's dropped connection is often seen before its own end is reported).
  if (code && *code != -SIGKILL) return status;
  return w.why_ended + (status.empty() ? "" : " (" + status + ")");
}
}  // namespace

std::shared_ptr<pool_core> pool_core::make(std::shared_ptr<runtime> rt, pool_options options) {
  auto core = std::make_shared<pool_master>(rt, std::move(options));
  // With the caller's io_context the loop may not run yet: the workers start once it does.
  rt->run_soon([core] { core->start(); });
  return core;
}

pool_options pool_master::checked(pool_options options) {
  if (!options.processes) options.processes = cpu_count();
  if (*options.processes < 1)
    throw error(errc::config_error, "pool: processes must be at least 1, got " + std::to_string(*options.processes) +
                                        "; leave it unset for cpu_count()");
  if (options.max_attempts < 1) throw error(errc::config_error, "pool: max_attempts must be at least 1");
  if (options.prefetch < 0) throw error(errc::config_error, "pool: prefetch must be 0 or more");
  if (options.maxtasksperchild < 0) throw error(errc::config_error, "pool: maxtasksperchild must be 0 or more");
  if (options.report_interval.count() < 0)
    throw error(errc::config_error, "pool: report_interval must be 0 (after every item) or more");
  if (options.task_timeout.count() < 0)
    throw error(errc::config_error, "pool: task_timeout must be 0 (no limit) or more, got " +
                                        std::to_string(options.task_timeout.count()) + " ms");
  return options;
}

pool_master::pool_master(std::shared_ptr<runtime> rt, pool_options options)
    : rt_(std::move(rt)),
      options_(checked(std::move(options))),
      id_(rt_->new_channel_id()),  // unique among services too
      workers_(*rt_, id_, options_,
               {.ended = [this](pool_worker&& w) { on_worker_ended(std::move(w)); },
                .cannot_start =
                    [this](std::exception_ptr e) {
                      note_failure("workers cannot start: " + what_of(e));
                      fail_all(e);
                    },
                .raised_needs_refused = [this](std::exception_ptr e) { fail_uncovered(e); }}),
      progress_(options_.progress, [this] { return progress_frame(); }) {}

pool_master::~pool_master() {
  rt_->recorder().record(record_kind::pool_end, 0, id_);
  // Its last state, marked ended (the destructor may run off the loop, where describe() may not).
  if (view_timer_) rt_->show_pool_upstream(id_, last_view_, /*ended=*/true);
}

void pool_master::show_upstream() {
  if (!view_timer_) return;
  last_view_ = boost::json::serialize(describe());
  rt_->show_pool_upstream(id_, last_view_, false);
}

void pool_master::show_upstream_every() {
  show_upstream();
  view_timer_->expires_after(std::chrono::milliseconds(std::max(10, rt_->cfg().dashboard_interval_ms)));
  view_timer_->async_wait([weak = weak_from_this()](std::error_code ec) {
    if (auto self = weak.lock(); self && !ec) self->show_upstream_every();
  });
}

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
  check_open_files(workers_.target());
  try {
    rt_->master().listen();  // how children reach this master says whether they share its memory
    shared_in_host_memory_ = rt_->master().children_on_this_host();
  } catch (const std::exception&) {
    // No backend to listen for (an engine that does not answer): the workers' start says so.
  }
  tasks_.shared_limits(rt_->cfg().shared_cache_bytes, shared_in_host_memory_);
  rt_->recorder().record(record_kind::pool_begin, static_cast<std::uint32_t>(workers_.target()), id_);
  if (auto* board = rt_->run_dashboard()) {
    board->view().add_pool(id_, [weak = weak_from_this()]() -> std::optional<boost::json::object> {
      if (auto self = weak.lock()) return self->describe();
      return std::nullopt;
    });
  } else if (rt_->shows_pools_upstream()) {
    view_timer_ = std::make_unique<asio::steady_timer>(rt_->io());
    show_upstream_every();
  }
  workers_.start(weak_from_this());
}

// ---- from any thread

void pool_master::check_open() const {
  if (closed_) throw error(errc::closed, "pool is closed: no more work can be submitted");
}

void pool_master::on_loop(unique_function<void(pool_core&)> f) {
  rt_->run_sync([&] { f(*this); });
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
  auto needs = find_meta(function_id);
  if (!workers_.covers(needs)) workers_.check_capacity(needs);
  // The workers could not start for the work before: they try again for this one.
  bool start_again = workers_.try_again();
  std::size_t grow_to = 0;
  if (chunksize == 0) {
    // As multiprocessing: about four chunks per worker. A stream keeps under its limit. When
    // the size is unknown, chunks start at 1 and double up to that limit (or 1024): the first
    // results come at once, and a long input is not sent one item a message.
    auto per = static_cast<std::size_t>(workers_.target()) * 4;
    auto limit = sink->chunk_limit();
    chunksize = hint ? std::max<std::size_t>(1, (hint + per - 1) / per) : 1;
    if (limit) chunksize = std::min(chunksize, limit);
    if (!hint) grow_to = limit ? limit : 1024;
  }
  if (!workers_.covers(needs)) workers_.raise_needs(needs);
  auto sub = std::make_shared<pool_submission>(pool_submission{function_id, chunksize, std::move(sink), call.retry, needs});
  sub->grow_to = grow_to;
  sub->timeout = timeout;
  sub->retry_timed_out = call.retry_timed_out.value_or(options_.retry_timed_out);
  if (timeout.count() && !timeouts_used_) {
    timeouts_used_ = true;
    deadline_timer_ = std::make_unique<asio::steady_timer>(rt_->io());
  }
  sub->recorded_as = ++maps_;
  rt_->recorder().record(record_kind::map_begin, 0, id_, sub->recorded_as, hint);
  tasks_.add(std::move(sub));
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
  show_upstream();  // its state at its end: the last the run's page gets
  if (deadline_timer_) deadline_timer_->cancel();
  rt_->services().remove(id_);
  check_joined();
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
  std::vector<pool_worker*> running;
  workers_.for_each([&](pool_worker& w) {
    if (!w.tasks.empty() && std::find(stopped.begin(), stopped.end(), w.tasks.front()) != stopped.end()) running.push_back(&w);
  });
  for (auto* w : running) {
    std::deque<std::uint64_t> behind(w->tasks.begin() + 1, w->tasks.end());
    tasks_.put_back_held(behind);
    w->tasks.clear();
    workers_.end_now(*w, "killed: the call it ran was cancelled");
  }
  dispatch();
}

void pool_master::when_joined(unique_function<void()> done) {
  joined_waiters_.push_back(std::move(done));
  check_joined();
}

void pool_master::when_ready(unique_function<void()> done) {
  ready_waiters_.push_back(std::move(done));
  check_ready();
}

pool_stats pool_master::stats() const {
  pool_stats s;
  s.queued = tasks_.queued_items();
  s.running = tasks_.running_items();
  s.done = tasks_.done();
  s.retried = tasks_.retried();
  s.workers_lost = workers_lost_;
  s.workers = workers_.live();
  s.workers_started = workers_.started();
  s.shared_objects_sent = shared_sent_;
  s.shared_bytes_sent = shared_bytes_sent_;
  s.shared_bytes_host = shared_bytes_host_;
  return s;
}

boost::json::object pool_master::describe() const {
  auto s = stats();
  boost::json::object out{{"id", id_},
                          {"state", terminating_ ? "terminating" : closed_ ? "closed" : "open"},
                          {"target", workers_.target()}};
  out["stats"] = {{"queued", s.queued},   {"running", s.running},           {"done", s.done},
                  {"retried", s.retried}, {"workers_lost", s.workers_lost}, {"workers", s.workers},
                  {"workers_started", s.workers_started}};
  // A page stays readable, and a sample cheap, with thousands of workers: the first ones are
  // listed, all are counted.
  constexpr std::size_t listed = 256;
  boost::json::array workers;
  std::size_t total = 0;
  const_cast<worker_set&>(workers_).for_each([&](pool_worker& w) {
    if (++total > listed) return;
    std::string state = !w.connected           ? "starting"
                        : w.leaving            ? "leaving"
                        : w.stopped_since      ? "stopped"
                        : !w.tasks.empty()     ? "busy"
                                               : "idle";
    boost::json::object o{{"name", w.proc->name()},
                          {"pid", w.proc->pid()},
                          {"state", state},
                          {"items", tasks_.items_in(w.tasks)},
                          {"done", w.items_done}};
    if (!w.connected)
      if (auto why = w.proc->pending_reason(); !why.empty()) o["state"] = "waiting", o["pending"] = why;
    workers.push_back(std::move(o));
  });
  out["workers"] = std::move(workers);
  out["workers_total"] = total;
  out["workers_shown"] = std::min(total, listed);
  boost::json::array failures;
  for (auto& [at, what] : failures_) failures.push_back(boost::json::object{{"at_s", at}, {"what", what}});
  out["failures"] = std::move(failures);
  return out;
}

void pool_master::note_failure(std::string what) {
  failures_.emplace_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count(), std::move(what));
  if (failures_.size() > failures_kept) failures_.pop_front();
}

void pool_master::on_shutdown() noexcept {
  workers_.cancel_timers();
  progress_.cancel();
  if (deadline_timer_) deadline_timer_->cancel();
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
  if (h.type == pool_kind::ready) {
    if (!w->recorded_as) {
      w->recorded_as = rt_->recorder().name(w->proc->name());
      rt_->recorder().record(record_kind::worker_up, w->recorded_as, id_, static_cast<std::uint64_t>(w->proc->pid()));
    }
    if (!workers_.on_ready(*w, static_cast<int>(h.aux))) return;
    check_ready();
  } else if (h.type == pool_kind::partial) {
    w->items_done += h.aux;  // items reported one by one (a chunk resent after a death)
    tasks_.on_results(h.request, w->rid, w->proc->name(), std::move(payload), false, h.aux);
    if (timeouts_used_) {
      w->running_since = std::chrono::steady_clock::now();
      watch_deadline(*w);
    }
  } else if (h.type == pool_kind::hosted) {
    if ((payload.size() == 1 || payload.size() == 2) && payload[0].size() == sizeof(hosted_at)) {
      hosted_at at;
      std::memcpy(&at, payload[0].data(), sizeof at);
      on_hosted(*w, at, payload.size() == 2 ? payload[1].to_string() : std::string());
    }
    return;
  } else if (h.type == pool_kind::need) {
    if (payload.size() == 1 && payload[0].size() == sizeof(std::uint64_t)) {
      std::uint64_t id;
      std::memcpy(&id, payload[0].data(), sizeof id);
      on_need(*w, id);
    }
    return;
  } else if (h.type == pool_kind::result) {
    rt_->recorder().record(record_kind::task_done, w->recorded_as, id_, h.request, ran_us_of_result(h.aux) * 1000);
    if (auto* t = tasks_.in_flight(h.request)) w->items_done += t->count();
    std::erase(w->tasks, h.request);
    if (w->tasks.empty()) w->holds_alone = false;
    tasks_.on_results(h.request, w->rid, w->proc->name(), std::move(payload));
    w->credit += credit_of_result(h.aux);
    workers_.offer(*w);
    workers_.on_completed(*w);
    if (timeouts_used_) {
      w->running_since = std::chrono::steady_clock::now();
      watch_deadline(*w);
    }
  }
  dispatch();
}

void pool_master::dispatch() {
  // Enough chunks waiting to refill every worker's credit twice over.
  auto window = static_cast<std::size_t>(std::max(1, workers_.target())) * (options_.prefetch + 1) * 2;
  tasks_.feed(window, rt_->cfg().max_message_bytes);
  while (auto* next = tasks_.next()) {
    auto* w = workers_.least_loaded(next->sub->needs, next->alone);
    if (!w) break;
    auto t = tasks_.take_next();
    task_head head;
    head.function_id = t.sub->function_id;
    head.skip = static_cast<std::uint32_t>(t.begin);
    head.run = static_cast<std::uint32_t>(t.count());
    // Under a timeout, the master must know which item runs and since when.
    head.report_each = t.sub->timeout.count() ? 1 : 0;
    head.careful = t.careful ? 1 : 0;
    head.shares_objects = t.shares_objects ? 1 : 0;
    auto objects = attach_shared(*w, *t.args);
    head.objects = static_cast<std::uint16_t>(objects.count);
    // The frames reference the task's arguments: kept for a resend, never copied.
    auto m = make_message(pool_kind::task, {.channel = id_, .request = t.id, .aux = static_cast<std::uint32_t>(t.packed)},
                          as_pod(head), std::move(objects.frames), to_shared_frames(t.args));
    if (auto ec = rt_->master().try_send_to_child(w->rid, std::move(m))) {
      w->shared.resize(w->shared.size() - objects.count);  // it never got them
      tasks_.put_back(std::move(t));
      workers_.unreachable(*w, ec);
      continue;
    }
    rt_->recorder().record(record_kind::task_sent, w->recorded_as, id_, t.id, task_sent_items(t.count(), t.sub->recorded_as));
    shared_sent_ += objects.count;
    shared_bytes_sent_ += objects.bytes;
    --w->credit;
    w->tasks.push_back(t.id);
    w->holds_alone = t.alone;
    tasks_.sent(std::move(t), w->rid);
    if (timeouts_used_ && w->tasks.size() == 1) {
      w->running_since = std::chrono::steady_clock::now();
      watch_deadline(*w);
    }
    tasks_.feed(window, rt_->cfg().max_message_bytes);
  }
  maybe_stop_workers();
}

pool_master::attached pool_master::attach_shared(pool_worker& w, const writer& args) {
  attached out;
  // Objects gone since this worker got them go first: it lets them go before the task runs,
  // whether or not the posted release reached it yet.
  std::erase_if(w.shared, [&](auto& held) {
    if (!held.second.expired()) return false;
    release_to(w, held.first);
    forget_host_copies(held.first);
    return true;
  });
  for (auto& e : args.shared_attached()) {
    if (std::find_if(w.shared.begin(), w.shared.end(), [&](auto& held) { return held.first == e->id(); }) != w.shared.end())
      continue;
    if (watched_.insert(e->id()).second) {
      // When its last handle here goes, the workers that got it are told to let it go.
      e->on_release([weak = weak_from_this(), rt = std::weak_ptr<runtime>(rt_)](std::uint64_t id) {
        if (auto r = rt.lock())
          asio::post(r->executor(), [weak, id] {
            if (auto self = weak.lock()) self->on_shared_released(id);
          });
      });
    }
    // Small objects go in the message: below host_memory_min_bytes, a memfd's calls and each
    // worker's map cost more than the copy through the socket (es_round_shared).
    bool large = e->bytes() >= host_memory_min_bytes;
    if (large && !shared_in_host_memory_) {
      out.bytes += attach_for_remote_host(out.frames, w, e);
    } else {
      bool host = shared_in_host_memory_ && large;
      bool copied = host && e->has_host_copy();
      try {
        out.bytes += append_shared(out.frames, *e, host);
      } catch (const std::exception& ex) {
        if (!host) throw;
        // No shared memory to be had (memfd): the object goes in the message, as to another host.
        logf(log_level::warn, "shared object ", e->id(), " goes to each worker in its messages: ", ex.what());
        out.bytes += append_shared(out.frames, *e, false);
      }
      if (host && !copied && e->has_host_copy()) shared_bytes_host_ += e->bytes();
    }
    w.shared.emplace_back(e->id(), e);
    ++out.count;
  }
  return out;
}

bool pool_master::has_host_mates(const pool_worker& w) {
  bool mates = false;
  workers_.for_each([&](pool_worker& o) {
    mates = mates || (&o != &w && !o.leaving && o.proc->memory_domain() == w.proc->memory_domain());
  });
  return mates;
}

pool_master::object_source* pool_master::free_source(object_sources& src) {
  object_source* best = nullptr;
  for (auto& s : src.ready)
    if (s.serving < source_fanout && (!best || s.serving < best->serving)) best = &s;
  return best;
}

void pool_master::fetch_from(multipart& out, pool_worker& w, const shared_entry& e, object_source& from, host_copy& st) {
  append_shared_from_peer(out, e, from.endpoint, from.public_key, has_host_mates(w));
  ++from.serving;
  st.source = from.rid;
  ++sources_[e.id()].inflight;
}

std::size_t pool_master::attach_for_remote_host(multipart& out, pool_worker& w, const std::shared_ptr<const shared_entry>& e) {
  // One copy per memory domain: its first worker gets the object whole and, when it has mates,
  // copies it into its host's memory; the others map that copy, or wait until it is made. The
  // master sends the first master_fanout whole copies; later domains fetch theirs from a worker
  // that has it (a tree: each source serves source_fanout at a time), or wait for one.
  auto& st = host_copies_[{w.proc->memory_domain(), e->id()}];
  if (!st.holder.empty()) {
    if (st.fd >= 0) {
      append_shared_host(out, *e, st.pid, st.fd);
    } else {
      append_shared_later(out, *e);
      st.waiting.push_back(w.rid);
    }
    return 0;
  }
  st.holder = w.rid;
  auto& src = sources_[e->id()];
  bool master_done = src.master_copies >= master_fanout;
  if (auto* from = master_done ? free_source(src) : nullptr) {
    fetch_from(out, w, *e, *from, st);
    return 0;
  }
  if (master_done && src.inflight) {
    append_shared_later(out, *e);  // a source is on its way
    src.pending.push_back(w.rid);
    return 0;
  }
  // Two hosts get their copies from the master at once, as fast as one copy each; another comes
  // from it only when no source is left.
  ++src.master_copies;
  ++src.inflight;
  return append_shared_frames(out, *e, has_host_mates(w), true);
}

std::shared_ptr<const shared_entry> pool_master::entry_held(const pool_worker& w, std::uint64_t id) const {
  for (auto& [held, e] : w.shared)
    if (held == id) return e.lock();
  return nullptr;
}

void pool_master::send_whole(pool_worker& w, std::uint64_t id, bool as_holder) {
  auto e = entry_held(w, id);
  if (!e) {
    logf(log_level::error, w.proc->name(), " waits for shared object ", id, ", which is gone");
    return;
  }
  multipart m;
  auto bytes = as_holder ? append_shared_frames(m, *e, has_host_mates(w), true) : append_shared_frames(m, *e);
  if (!rt_->master().try_send_to_child(w.rid, make_message(pool_kind::hosted, {.channel = id_}, std::move(m))))
    shared_bytes_sent_ += bytes;
}

void pool_master::on_need(pool_worker& w, std::uint64_t id) {
  // Its host copy or its fetch failed. The holder of a domain gets the master's copy and goes on
  // as its domain's holder; another worker gets one of its own.
  auto it = host_copies_.find({w.proc->memory_domain(), id});
  bool holder = it != host_copies_.end() && it->second.holder == w.rid;
  if (holder && !it->second.source.empty()) {
    if (auto* from = find_source(id, it->second.source)) --from->serving;
    it->second.source.clear();
  }
  send_whole(w, id, holder);
}

pool_master::object_source* pool_master::find_source(std::uint64_t id, const std::string& rid) {
  auto it = sources_.find(id);
  if (it == sources_.end()) return nullptr;
  for (auto& s : it->second.ready)
    if (s.rid == rid) return &s;
  return nullptr;
}

void pool_master::on_hosted(pool_worker& w, const hosted_at& at, const std::string& server) {
  auto it = host_copies_.find({w.proc->memory_domain(), at.id});
  if (it == host_copies_.end() || it->second.holder != w.rid) return;
  auto& st = it->second;
  auto& src = sources_[at.id];
  if (src.inflight) --src.inflight;
  if (!st.source.empty()) {
    if (auto* from = find_source(at.id, st.source)) --from->serving;
    st.source.clear();
  }
  if (auto nl = server.find('\n'); nl != std::string::npos)
    src.ready.push_back({w.rid, server.substr(0, nl), server.substr(nl + 1), 0});
  auto waiting = std::exchange(st.waiting, {});
  if (at.fd < 0) {
    // No host copy (none asked, or it could not): those waiting get the object itself, and the
    // next of the host tries again.
    st.holder.clear();
    host_copies_.erase(it);
    for (auto& rid : waiting)
      if (auto* o = workers_.find(rid)) send_whole(*o, at.id, false);
  } else {
    st.pid = at.pid;
    st.fd = at.fd;
    for (auto& rid : waiting) {
      auto* o = workers_.find(rid);
      if (!o) continue;
      auto e = entry_held(*o, at.id);
      if (!e) continue;
      multipart m;
      append_shared_host(m, *e, st.pid, st.fd);
      (void)rt_->master().try_send_to_child(rid, make_message(pool_kind::hosted, {.channel = id_}, std::move(m)));
    }
  }
  serve_pending(at.id);
}

void pool_master::serve_pending(std::uint64_t id) {
  auto sit = sources_.find(id);
  if (sit == sources_.end()) return;
  auto& src = sit->second;
  while (!src.pending.empty()) {
    auto* from = free_source(src);
    if (!from && src.inflight) return;  // the next source to be made serves them
    auto rid = src.pending.front();
    src.pending.erase(src.pending.begin());
    auto* o = workers_.find(rid);
    if (!o) continue;
    auto hc = host_copies_.find({o->proc->memory_domain(), id});
    if (hc == host_copies_.end() || hc->second.holder != rid) continue;
    if (!from) {  // no source left at all (they ended): the master's copy again
      ++src.inflight;
      send_whole(*o, id, true);
      continue;
    }
    auto e = entry_held(*o, id);
    if (!e) continue;
    multipart m;
    fetch_from(m, *o, *e, *from, hc->second);
    (void)rt_->master().try_send_to_child(rid, make_message(pool_kind::hosted, {.channel = id_}, std::move(m)));
  }
}

void pool_master::forget_host_copies(std::uint64_t id) {
  std::erase_if(host_copies_, [&](auto& kv) { return kv.first.second == id; });
  sources_.erase(id);
}

void pool_master::on_holder_lost(const pool_worker& w) {
  for (auto& [id, src] : sources_) {
    std::erase_if(src.ready, [&](auto& s) { return s.rid == w.rid; });
    std::erase(src.pending, w.rid);
  }
  std::vector<std::uint64_t> retry;
  for (auto it = host_copies_.begin(); it != host_copies_.end();) {
    auto& st = it->second;
    auto id = it->first.second;
    std::erase(st.waiting, w.rid);
    if (st.holder != w.rid) {
      ++it;
      continue;
    }
    if (st.fd < 0) {  // it was getting the object whole: not any more
      auto& src = sources_[id];
      if (src.inflight) --src.inflight;
      if (!st.source.empty())
        if (auto* from = find_source(id, st.source)) --from->serving;
    }
    retry.push_back(id);
    // Its copy goes with it (the mappings made stay). While none was made, the first of those
    // waiting gets the object whole instead, and makes the copy.
    pool_worker* next = nullptr;
    while (!next && st.fd < 0 && !st.waiting.empty()) {
      next = workers_.find(st.waiting.front());
      st.waiting.erase(st.waiting.begin());
    }
    if (!next) {
      auto waiting = std::move(st.waiting);
      it = host_copies_.erase(it);
      for (auto& rid : waiting)
        if (auto* o = workers_.find(rid)) send_whole(*o, id, false);
      continue;
    }
    st.holder = next->rid;
    st.source.clear();
    ++sources_[id].inflight;
    send_whole(*next, id, true);
    ++it;
  }
  for (auto id : retry) serve_pending(id);
}

void pool_master::release_to(pool_worker& w, std::uint64_t id) {
  if (w.connected) (void)rt_->master().try_send_to_child(w.rid, make_message(pool_kind::release, {.channel = id_}, as_pod(id)));
}

void pool_master::on_shared_released(std::uint64_t id) {
  watched_.erase(id);
  forget_host_copies(id);
  workers_.for_each([&](pool_worker& w) {
    if (std::erase_if(w.shared, [&](auto& held) { return held.first == id; })) release_to(w, id);
  });
}

void pool_master::on_worker_ended(pool_worker&& w) {
  if (!host_copies_.empty() || !sources_.empty()) on_holder_lost(w);
  bool lost = !w.leaving && !terminating_ && !rt_->is_shut_down();
  if (lost || (!w.tasks.empty() && !rt_->is_shut_down())) {
    auto code = w.proc->exit_code().value_or(0);
    // In items, as stats().retried counts them: a task is a chunk of items.
    logf(log_level::warn, w.proc->name(), " (pid ", w.proc->pid(), ") ended with code ", code, " holding ",
         tasks_.items_in(w.tasks), " item(s) in ", w.tasks.size(), " chunk(s)");
    if (lost && w.connected) ++workers_lost_;
    note_failure(w.proc->name() + " ended (" + how_it_ended(w) + ") holding " + std::to_string(tasks_.items_in(w.tasks)) +
                 " item(s)");
  }
  if (rt_->recorder().on()) {
    auto& rec = rt_->recorder();
    if (!w.recorded_as) w.recorded_as = rec.name(w.proc->name());  // it never connected
    for (auto task : w.tasks) rec.record(record_kind::task_lost, w.recorded_as, id_, task);
    rec.record(record_kind::worker_down, w.recorded_as, id_, static_cast<std::uint64_t>(w.proc->exit_code().value_or(0)),
               lost ? 1 : 0, how_it_ended(w));
  }
  tasks_.on_worker_lost(w.tasks, {w.proc->name(), how_it_ended(w)}, options_.retry, options_.max_attempts);
  // Closed with work still to do (what the lost worker held, or queued behind it): its
  // replacement finishes it; terminate() failed all work first, so it starts none.
  workers_.top_up(!terminating_ && !tasks_.drained());
  dispatch();
  check_joined();
}

void pool_master::fail_all(std::exception_ptr e) {
  workers_.forget_tasks();
  tasks_.fail_all(e);
  check_ready();
}

void pool_master::fail_uncovered(std::exception_ptr e) {
  // No task of theirs was ever sent: no worker covered them.
  (void)tasks_.fail_where([this](const pool_submission& s) { return !workers_.covers(s.needs); }, e);
  check_ready();
  dispatch();
}

void pool_master::maybe_stop_workers() {
  if (!closed_ || !tasks_.drained()) return;
  workers_.retire_all();
  check_joined();
}

void pool_master::check_joined() {
  if (!closed_ || !workers_.empty()) return;
  auto waiters = std::move(joined_waiters_);
  joined_waiters_.clear();
  for (auto& f : waiters) f();
}

void pool_master::check_ready() {
  if (workers_.connected() < static_cast<std::size_t>(workers_.target()) && !workers_.failed() && !closed_) return;
  auto waiters = std::move(ready_waiters_);
  ready_waiters_.clear();
  for (auto& f : waiters) f();
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

namespace fiber::detail {

void pool_master::watch_deadline(pool_worker& w) {
  if (auto when = deadline_of(w); when && (!deadline_armed_ || *when < *deadline_armed_)) arm_deadline(*when);
}

std::optional<std::chrono::steady_clock::time_point> pool_master::deadline_of(const pool_worker& w) const {
  if (w.tasks.empty() || w.leaving) return std::nullopt;
  auto* t = tasks_.in_flight(w.tasks.front());
  if (!t || !t->sub->timeout.count()) return std::nullopt;
  return w.running_since + t->sub->timeout;
}

void pool_master::arm_deadline(std::chrono::steady_clock::time_point when) {
  deadline_armed_ = when;
  deadline_timer_->expires_at(when);  // cancels the wait for a later one
  deadline_timer_->async_wait([weak = weak_from_this()](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->rt_->is_shut_down()) return;
    self->on_deadline();
  });
}

void pool_master::on_deadline() {
  deadline_armed_.reset();
  auto now = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> next;
  std::vector<pool_worker*> late;
  workers_.for_each([&](pool_worker& w) {
    auto when = deadline_of(w);
    if (!when) return;
    if (*when <= now)
      late.push_back(&w);
    else if (!next || *when < *next)
      next = when;
  });
  for (auto* w : late) {
    logf(log_level::warn, w->proc->name(), " ran an item longer than its task_timeout; killing it");
    // The first task held is the one that ran too long; the others were prefetched behind it and
    // never started: they are lost with the worker (and run again), not timed out.
    for (std::size_t i = 0; i < w->tasks.size(); ++i)
      rt_->recorder().record(i ? record_kind::task_lost : record_kind::task_timed_out, w->recorded_as, id_, w->tasks[i]);
    note_failure(w->proc->name() + " ran an item longer than its task_timeout and was killed");
    tasks_.on_timed_out(w->tasks, w->proc->name(), options_.max_attempts);
    w->tasks.clear();
    workers_.end_now(*w, "killed: its item ran longer than task_timeout");
  }
  if (next) arm_deadline(*next);
  dispatch();
}

}  // namespace fiber::detail
