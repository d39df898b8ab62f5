#include "primitives/child_process.hpp"
#include "primitives/child_hello.hpp"

#include <boost/json.hpp>
#include <csignal>

#include "core/build_id.hpp"
#include "core/log.hpp"
#include "core/random_token.hpp"
#include "core/same_secret.hpp"
#include "core/message_limit.hpp"
#include "core/process_memory.hpp"
#include "core/remote_failure.hpp"
#include "core/worker_env.hpp"
#include "runtime/init_guard.hpp"

namespace fiber::detail {

namespace {
std::atomic<int> next_number{1};
}  // namespace

child_process::child_process(std::shared_ptr<runtime> rt, encoded_call call)
    : rt_(std::move(rt)), name_("Process-" + std::to_string(next_number++)), call_(std::move(call)),
      needs_(find_meta(call_.function_id)) {}

std::shared_ptr<child_process> child_process::make(std::shared_ptr<runtime> rt, encoded_call call,
                                                   std::optional<meta> needs, adopter take) {
  auto p = std::shared_ptr<child_process>(new child_process(std::move(rt), std::move(call)));
  if (needs) p->needs_ = *needs;
  p->adopter_ = std::move(take);
  return p;
}

void child_process::set_name(std::string name) {
  if (state() != phase::created) throw error(errc::already_started, "set_name on process " + name_ + " after start()");
  name_ = std::move(name);
}

int child_process::pid() const noexcept {
  if (int p = pid_.load()) return p;
  auto s = state();
  return (s == phase::running || s == phase::ended) && child_ ? child_->pid() : 0;
}

// ---- starting

void child_process::start(started_handler& done) {
  auto expected = phase::created;
  if (!state_.compare_exchange_strong(expected, phase::starting))
    throw error(errc::already_started, "process " + name_ + " was already started; create a new process object");
  try {
    spawn();
  } catch (...) {
    // Not started: the object may be started again, and nothing is left registered.
    if (!peer_.empty()) rt_->master().detach_child(peer_);
    state_ = phase::created;
    throw;
  }
  start_.open(std::move(done));
  rt_->master().track_job(child_);
  ends_with_link = child_;
  pid_ = child_->pid();
  rt_->observer().record_child_event(record_kind::process_start, tree_name_, static_cast<std::uint64_t>(pid_.load()));
  child_->on_exit([weak = weak_from_this()](int code) {
    if (auto self = weak.lock()) self->on_exit(code);
  });
  // In the run's recording: why the engine holds it back (a Slurm queue, a pod not scheduled).
  child_->on_pending([weak = weak_from_this()](const std::string& why) {
    if (auto self = weak.lock()) self->rt_->observer().record_child_event(record_kind::process_pending, self->tree_name_, 0, 0, why);
  });
  // The handshake deadline counts from when the child runs: a scheduler's queue wait is not the
  // child's fault (a backend that queues fails a hopeless wait itself).
  child_->when_running([weak = weak_from_this(), asked = needs_with_defaults(needs_, rt_->cfg())] {
    auto self = weak.lock();
    if (!self) return;
    auto limit = std::chrono::milliseconds(self->rt_->cfg().start_timeout_ms);
    // A process taken up links again once its running item ends, however long that is: its
    // end is seen by its pidfd, and no handshake deadline stands for it.
    if (!self->adopter_) self->start_.arm(self->rt_->io(), limit, [weak, limit](std::error_code ec) {
      auto late = weak.lock();
      if (ec || !late || !late->start_.waiting()) return;
      late->start_.complete(make_error_code(errc::timeout),
                            "process " + late->name_ + " did not complete its handshake within start_timeout_ms (" +
                                std::to_string(limit.count()) + " ms); killed");
      late->child_->signal(SIGKILL);
    });
    // What it asked for and where its engine put it, in the run's recording.
    self->rt_->observer().record_child_event(record_kind::resources, self->tree_name_, static_cast<std::uint64_t>(asked.cpu),
                                  resources_of(static_cast<std::uint64_t>(std::max(asked.memory_mb, 0)),
                                               static_cast<std::uint64_t>(std::max(asked.gpu, 0))),
                                  self->child_->placement());
  });
}

void child_process::spawn() {
  auto& rt = *rt_;
  if (rt.is_shut_down()) throw error(errc::closed, "cannot start " + name_ + ": its fiber context has been stopped");
  require_init();
  check_message_size("the arguments of " + name_, call_.args.total_size(), rt.cfg().max_message_bytes,
                     "send large data through a queue or a pipe in pieces");
  auto endpoint = rt.master().listen();  // in a child: it becomes the master of its own (nested)
  peer_ = std::to_string(master_channels::new_peer());
  rt.master().attach_child(peer_, weak_from_this());
  auto spec = spec_for_needs(needs_, rt.cfg());  // cpu, memory, GPUs
  spec.name = name_;
  spec.job_id = rt.job_id();
  spec.executable = rt.cfg().executable.empty() ? executable_path() : rt.cfg().executable;
  spec.args = {worker_flag};
  // Its name in the tree (the recording's: each level numbers its own processes from 1).
  tree_name_ = name_;
  if (!rt.is_master()) {
    const char* mine = std::getenv(env_tree_name);
    const char* own = std::getenv(env_name);
    tree_name_ = std::string(mine ? mine : own ? own : "?") + "/" + name_;
  }
  spec.env = {{env_token, peer_},
              {env_endpoint, endpoint},
              {env_job, rt.job_id()},
              {env_name, name_},
              {env_tree_name, tree_name_},
              {env_depth, std::to_string(rt.depth() + 1)}};
  spec.secret = rt.master().links().worker_credentials();
  nonce_ = random_token();
  spec.env.emplace_back(env_nonce, nonce_);
  if (auto hub = rt.master().links().hub_name(); !hub.empty()) spec.env.emplace_back(env_hub, hub);  // its host's hub
  if (adopter_) {
    child_ = adopter_(spec);
    return;
  }
  auto& backend = rt.master().the_backend();
  backend.check_capacity(spec);  // a request no node can meet fails before anything starts
  child_ = backend.spawn(spec);
}

spawn_spec spec_for_needs(const meta& needs, const fiber::config& cfg) {
  spawn_spec spec;
  auto full = needs_with_defaults(needs, cfg);
  spec.cpu = full.cpu;
  spec.cpu_declared = needs.cpu != 0;
  spec.memory_mb = full.memory_mb;
  spec.gpu = full.gpu;
  return spec;
}

meta needs_with_defaults(const meta& needs, const fiber::config& cfg) {
  return {needs.cpu ? needs.cpu : cfg.cpu_per_job, needs.memory_mb ? needs.memory_mb : cfg.mem_per_job, needs.gpu};
}

// ---- what the child says

void child_process::on_hello(const std::string& text) {
  auto hello = read_child_hello(text, nonce_, name_);
  if (!hello.problem.empty()) {
    rt_->master().send_to_child(peer_, make_message(kind::refuse, {}, hello.problem));
    logf(log_level::error, "refused ", name_, ": ", hello.problem);
    start_.complete(make_error_code(hello.code), "cannot start " + name_ + ": " + hello.problem);
    return;
  }
  boost::json::object snapshot;
  for (auto& [k, v] : rt_->cfg().items()) snapshot[k] = v;
  auto cfg_text = boost::json::serialize(snapshot);
  auto welcome = make_message(kind::welcome, {}, cfg_text, as_pod(call_.function_id), call_.args);
  place_ = {std::move(hello.host), std::move(hello.memory_domain)};
  if (hello.pid) child_->reported_pid(*hello.pid);
  state_ = phase::running;
  // The child runs its target once welcomed, so it is welcomed, and start() completes, once
  // pid() has its value on every backend: a container that ran and ended before the engine
  // was asked for its pid reported 0 (seen under load).
  child_->when_identified([weak = weak_from_this(), welcome = std::move(welcome)]() mutable {
    auto self = weak.lock();
    if (!self) return;
    if (self->rt_->is_master()) {  // its routing id is its channel prefix
      self->rt_->master().send_to_child(self->peer_, std::move(welcome));
      self->start_.complete({}, {});
      return;
    }
    // A nested master's child: its channel prefix, unique in the job, comes from the top master.
    self->rt_->get(master_channels::prefix_channel, std::nullopt,
                   [weak, welcome = std::move(welcome)](std::error_code ec, multipart answer, bool) mutable {
                     auto child = weak.lock();
                     if (!child || child->state_ != phase::running) return;
                     std::uint32_t prefix = 0;
                     if (ec || answer.empty() || answer[0].size() != sizeof prefix) {
                       child->start_.complete(ec ? ec : make_error_code(errc::protocol_error),
                                            "cannot start " + child->name_ + ": the master above gave no channel prefix (" +
                                                (ec ? ec.message() : std::string("malformed answer")) + ")");
                       child->child_->signal(SIGKILL);
                       return;
                     }
                     std::memcpy(&prefix, answer[0].data(), sizeof prefix);
                     child->rt_->master().note_prefix(child->peer_, prefix);  // its queues end with it
                     auto h = parse_header(welcome[0]);
                     welcome[0] = make_header(kind::welcome, h->channel, h->request, prefix, h->flags);
                     child->rt_->master().send_to_child(child->peer_, std::move(welcome));
                     child->start_.complete({}, {});
                   });
  });
}

void child_process::on_done(bool threw, const std::string& detail) {
  bool exited = ending_.exit_code().has_value();
  if (!exited && child_) child_->expect_exit();
  ending_.heard_done(threw, detail, name_);
  if (exited) finish();
}

// ---- ending

void child_process::on_exit(int code) {
  if (auto& memory = child_->memory_stopped()) {
    auto words = memory_stop_text(*memory);
    logf(log_level::warn, "process ", name_, " was ", words);
    ending_.killed("it was " + words);
    ending_.went_past_memory(*memory);
  }
  ending_.exited(code);
  rt_->master().untrack_job(child_.get());
  if (start_.waiting()) {
    auto detail = child_->exit_detail();
    start_.complete(make_error_code(child_->never_fits() ? errc::unsatisfiable : errc::spawn_failed),
                   "process " + name_ + " (pid " + std::to_string(child_->pid()) + ") exited with code " +
                       std::to_string(code) + " before its handshake" +
                       (detail.empty() ? "; see its log (config log_file) or stderr" : ": " + detail));
    finish();
    return;
  }
  // exit_drained: a pool worker that handed its work back; what it sent before may still come.
  bool normal_exit = code == 0 || code == 1 || code == exit_drained;
  if (ending_.done_heard() || !normal_exit || state() != phase::running) {
    finish();
    return;
  }
  // What the child sent before exiting may still be in flight: wait briefly for its `done`.
  grace_timer_ = std::make_unique<asio::steady_timer>(rt_->io(), std::chrono::milliseconds(500));
  grace_timer_->async_wait([weak = weak_from_this()](std::error_code) {
    if (auto self = weak.lock()) self->finish();
  });
}

void child_process::finish() {
  if (state() == phase::ended) return;
  if (grace_timer_) grace_timer_->cancel();
  if (kill_timer_) kill_timer_->cancel();
  state_ = phase::ended;
  auto waiters = ending_.end();
  // d: 1 when it raised (text: what), 2 when fiber ended it (text: why).
  auto raised = ending_.raised();
  auto& by = ending_.ended_by();
  rt_->observer().record_child_event(record_kind::process_end, tree_name_,
                                     static_cast<std::uint64_t>(static_cast<std::int64_t>(ending_.exit_code().value_or(0))),
                                     raised ? 1 : by.empty() ? 0 : 2,
                                     raised ? std::string_view(raised->what()) : std::string_view(by));
  rt_->master().detach_child(peer_);
  for (auto& w : waiters) w();
}

void child_process::signal(int sig) noexcept {
  if (child_ && state() != phase::ended) child_->signal(sig);
}

void child_process::terminate() {
  if (state() == phase::ended || !child_) return;
  if (kill_timer_) return;  // terminating already: asked again, its SIGKILL must not move later
  child_->signal(SIGTERM);
  kill_timer_ = std::make_unique<asio::steady_timer>(rt_->io(), std::chrono::milliseconds(rt_->cfg().terminate_grace_ms));
  kill_timer_->async_wait([weak = weak_from_this()](std::error_code ec) {
    auto self = weak.lock();
    if (!ec && self) self->signal(SIGKILL);
  });
}

void child_process::on_master_shutdown() noexcept {
  if (is_alive())
    logf(owned_ ? log_level::debug : log_level::warn, "process ", name_, " still running when its context stopped: killed");
  kill_now();
}

void child_process::kill_now(std::string why) noexcept {
  if (!child_ || state() == phase::ended || state() == phase::created) return;
  // A child killed here never records its last memory: on this host its master reads it first,
  // so that the run's trace still shows what the child held.
  if (rt_->observer().recorder().on() && rt_->cfg().backend == "local" && pid_.load() > 0) {
    auto m = process_memory(pid_.load());
    if (m.peak) rt_->observer().record_child_event(record_kind::memory, tree_name_, m.resident, m.peak);
  }
  child_->kill_and_reap();
  rt_->master().untrack_job(child_.get());
  ending_.killed(std::move(why));
  start_.complete(make_error_code(errc::spawn_failed), "process " + name_ + " was killed while starting");
  finish();
}

}  // namespace fiber::detail
