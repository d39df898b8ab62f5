#include "fiber/process.hpp"

#include <asio/experimental/as_tuple.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <sched.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <csignal>

#include "io/log.hpp"
#include "runtime/build_id.hpp"
#include "runtime/runtime.hpp"
#include "runtime/worker_env.hpp"

namespace fiber {
namespace detail {

enum class phase { created, starting, running, ended };

struct process_state final : child_endpoint, std::enable_shared_from_this<process_state> {
  std::shared_ptr<runtime> rt;
  std::string name;
  encoded_call call;
  std::atomic<phase> state{phase::created};
  std::atomic<int> exit_code{0};
  std::atomic<int> pid{0};
  std::unique_ptr<job> child;
  std::string routing_id;
  unique_function<void(std::error_code, std::string)> on_started;
  std::unique_ptr<asio::steady_timer> start_timer, grace_timer, kill_timer;
  std::vector<unique_function<void()>> on_ended;
  bool exited = false, done_received = false;
  std::optional<remote_error> raised;  // written on the loop before `state` becomes ended

  void complete_start(std::error_code ec, std::string detail) {
    if (start_timer) start_timer->cancel();
    if (auto f = std::move(on_started)) {
      on_started = nullptr;
      f(ec, std::move(detail));
    }
  }

  void on_hello(const std::string& text) override {
    std::string problem;
    boost::json::object hello;
    try {
      hello = boost::json::parse(text).as_object();
    } catch (const std::exception& e) {
      problem = std::string("unreadable hello: ") + e.what();
    }
    auto field = [&](const char* k) -> std::string {
      auto* v = hello.if_contains(k);
      return v && v->is_string() ? std::string(v->as_string()) : std::string();
    };
    if (problem.empty()) {
      auto proto = hello.if_contains("protocol");
      if (!proto || !proto->is_int64() || proto->as_int64() != protocol_version)
        problem = "worker speaks protocol " + (proto ? boost::json::serialize(*proto) : std::string("?")) +
                  ", the master " + std::to_string(protocol_version);
      else if (field("build_id") != build_id() || field("registry") != std::to_string(registry_digest()))
        problem = "worker binary " + field("executable") + " (build-id " + field("build_id") + ", registry " +
                  field("registry") + ") differs from the master's " + executable_path() + " (build-id " +
                  build_id() + ", registry " + std::to_string(registry_digest()) +
                  "); run the same build in workers: rebuild the image or redeploy the executable";
    }
    if (!problem.empty()) {
      multipart refuse;
      refuse.push_back(make_header(kind::refuse));
      refuse.emplace_back(problem.data(), problem.size());
      rt->send_to_child(routing_id, std::move(refuse));
      logf(log_level::error, "refused ", name, ": ", problem);
      complete_start(make_error_code(problem.starts_with("worker binary") ? errc::binary_mismatch : errc::protocol_error),
                     "cannot start " + name + ": " + problem);
      return;
    }
    boost::json::object snapshot;
    for (auto& [k, v] : rt->cfg().items()) snapshot[k] = v;
    auto cfg_text = boost::json::serialize(snapshot);
    multipart welcome;
    welcome.push_back(make_header(kind::welcome));
    welcome.emplace_back(cfg_text.data(), cfg_text.size());
    welcome.emplace_back(&call.function_id, sizeof call.function_id);
    for (auto& f : rt->to_frames(call.args)) welcome.push_back(std::move(f));
    rt->send_to_child(routing_id, std::move(welcome));
    state = phase::running;
    complete_start({}, {});
  }

  void on_done(bool threw, const std::string& detail) override {
    done_received = true;
    if (threw) {
      std::string type = "unknown", message = detail;
      try {
        auto v = boost::json::parse(detail);
        type = std::string(v.at("type").as_string());
        message = std::string(v.at("message").as_string());
      } catch (const std::exception&) {
        logf(log_level::warn, name, " reported an exception in an unreadable form: ", detail);
      }
      raised.emplace(type, message, name);
    }
    if (exited) finish();
  }

  void on_exit(int code) {
    exited = true;
    exit_code = code;
    rt->untrack_job(child.get());
    if (on_started) {
      complete_start(make_error_code(errc::spawn_failed),
                     "process " + name + " (pid " + std::to_string(pid) + ") exited with code " + std::to_string(code) +
                         " before its handshake; see its log (config log_file) or stderr");
      finish();
      return;
    }
    bool normal_exit = code == 0 || code == 1;
    if (done_received || !normal_exit || state != phase::running) {
      finish();
      return;
    }
    // What the child sent before exiting may still be in flight: wait briefly for its `done`.
    grace_timer = std::make_unique<asio::steady_timer>(rt->io(), std::chrono::milliseconds(500));
    grace_timer->async_wait([weak = weak_from_this()](std::error_code) {
      if (auto self = weak.lock()) self->finish();
    });
  }

  void finish() {
    if (state == phase::ended) return;
    if (grace_timer) grace_timer->cancel();
    if (kill_timer) kill_timer->cancel();
    state = phase::ended;
    rt->detach_child(routing_id);
    auto waiters = std::move(on_ended);
    on_ended.clear();
    for (auto& w : waiters) w();
  }

  void on_master_shutdown() noexcept override {
    if (state == phase::starting || state == phase::running)
      logf(log_level::warn, "process ", name, " still running when its context stopped: killed");
    kill_now();
  }

  /// Kills and reaps now; on the loop thread.
  void kill_now() noexcept {
    if (!child || state == phase::ended || state == phase::created) return;
    child->kill_and_reap();
    rt->untrack_job(child.get());
    exited = true;
    exit_code = -SIGKILL;
    complete_start(make_error_code(errc::spawn_failed), "process " + name + " was killed while starting");
    finish();
  }
};

namespace {
std::atomic<std::uint64_t> next_token{1};
std::atomic<int> next_number{1};

template <class Token>
auto async_started(std::shared_ptr<process_state> s, Token&& token) {
  return asio::async_initiate<Token, void(std::error_code, std::string)>(
      [s](auto handler) {
        auto ex = asio::get_associated_executor(handler, s->rt->executor());
        s->on_started = [h = std::move(handler), ex](std::error_code ec, std::string d) mutable {
          asio::post(ex, [h = std::move(h), ec, d = std::move(d)]() mutable { h(ec, std::move(d)); });
        };
      },
      token);
}

/// Completes with true once ended, false when `timeout` passed first.
template <class Token>
auto async_ended(std::shared_ptr<process_state> s, std::optional<std::chrono::milliseconds> timeout, Token&& token) {
  return asio::async_initiate<Token, void(bool)>(
      [s, timeout](auto handler) {
        auto ex = asio::get_associated_executor(handler, s->rt->executor());
        struct shared {
          decltype(handler) h;
          std::unique_ptr<asio::steady_timer> timer;
          bool fired = false;
        };
        auto st = std::make_shared<shared>(shared{std::move(handler), nullptr});
        auto complete = [st, ex](bool ended) {
          if (st->fired) return;
          st->fired = true;
          if (st->timer) st->timer->cancel();
          asio::post(ex, [st, ended]() mutable { st->h(ended); });
        };
        if (s->state == phase::ended) return complete(true);
        s->on_ended.push_back([complete] { complete(true); });
        if (timeout) {
          st->timer = std::make_unique<asio::steady_timer>(s->rt->io(), *timeout);
          st->timer->async_wait([complete](std::error_code ec) {
            if (!ec) complete(false);
          });
        }
      },
      token);
}

asio::awaitable<void> start_impl(std::shared_ptr<process_state> s) {
  auto expected = phase::created;
  if (!s->state.compare_exchange_strong(expected, phase::starting))
    throw error(errc::already_started, "process " + s->name + " was already started; create a new process object");
  auto& rt = *s->rt;
  if (rt.is_shut_down()) {
    s->state = phase::created;
    throw error(errc::closed, "cannot start " + s->name + ": its fiber context has been stopped");
  }
  if (rt.my_role() != runtime::role::master)
    throw error(errc::spawn_failed, "starting processes from inside a worker is not supported yet; start them from the master");
  std::string endpoint;
  try {
    endpoint = rt.listen();
    s->routing_id = std::to_string(next_token++);
    rt.attach_child(s->routing_id, s);
    spawn_spec spec;
    spec.name = s->name;
    spec.executable = rt.cfg().executable.empty() ? executable_path() : rt.cfg().executable;
    spec.args = {worker_flag};
    spec.env = {{env_token, s->routing_id},
                {env_endpoint, endpoint},
                {env_job, rt.job_id()},
                {env_keys, rt.worker_credentials()},
                {env_name, s->name}};
    spec.cpu = rt.cfg().cpu_per_job;
    spec.memory_mb = rt.cfg().mem_per_job;
    s->child = rt.the_backend().spawn(spec);
  } catch (...) {
    rt.detach_child(s->routing_id);
    s->state = phase::created;
    throw;
  }
  rt.track_job(s->child.get());
  s->pid = s->child->pid();
  s->child->on_exit([weak = std::weak_ptr<process_state>(s)](int code) {
    if (auto self = weak.lock()) self->on_exit(code);
  });
  s->start_timer = std::make_unique<asio::steady_timer>(rt.io(), std::chrono::milliseconds(rt.cfg().start_timeout_ms));
  s->start_timer->async_wait([weak = std::weak_ptr<process_state>(s)](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || !self->on_started) return;
    self->complete_start(make_error_code(errc::timeout),
                         "process " + self->name + " did not complete its handshake within start_timeout_ms (" +
                             std::to_string(self->rt->cfg().start_timeout_ms) + " ms); killed");
    self->child->signal(SIGKILL);
  });
  auto [ec, detail] = co_await async_started(s, asio::experimental::as_tuple(asio::use_awaitable));
  if (ec) throw error(ec, detail);
}

asio::awaitable<bool> join_impl(std::shared_ptr<process_state> s, std::optional<std::chrono::milliseconds> timeout) {
  if (s->state == phase::created) throw error(errc::not_started, "join on process " + s->name + " before start()");
  co_return co_await async_ended(s, timeout, asio::use_awaitable);
}

asio::awaitable<void> join_void(std::shared_ptr<process_state> s) { co_await join_impl(std::move(s), std::nullopt); }

asio::awaitable<void> terminate_impl(std::shared_ptr<process_state> s) {
  if (s->state == phase::created) throw error(errc::not_started, "terminate on process " + s->name + " before start()");
  if (s->state == phase::ended) co_return;
  s->child->signal(SIGTERM);
  s->kill_timer = std::make_unique<asio::steady_timer>(s->rt->io(), std::chrono::milliseconds(s->rt->cfg().terminate_grace_ms));
  s->kill_timer->async_wait([weak = std::weak_ptr<process_state>(s)](std::error_code ec) {
    auto self = weak.lock();
    if (!ec && self && self->state != phase::ended) self->child->signal(SIGKILL);
  });
  co_await async_ended(s, std::nullopt, asio::use_awaitable);
}

/// Runs `f` on the runtime's loop and waits for it.
template <class F>
void run_on_loop(runtime& rt, F f) {
  rt.run_sync(std::move(f));
}
}  // namespace
}  // namespace detail

process::process(context& ctx, detail::encoded_call call) : state_(std::make_shared<detail::process_state>()) {
  state_->rt = ctx.runtime();
  state_->name = "Process-" + std::to_string(detail::next_number++);
  state_->call = std::move(call);
}

process::process(process&&) noexcept = default;
process& process::operator=(process&&) noexcept = default;

process::~process() {
  if (!state_) return;
  auto s = state_;
  auto st = s->state.load();
  if (st != detail::phase::starting && st != detail::phase::running) return;
  detail::logf(log_level::warn, "process ", s->name, " was still running when its process object was destroyed: killed");
  try {
    detail::run_on_loop(*s->rt, [s] { s->kill_now(); });
  } catch (const std::exception& e) {
    detail::logf(log_level::error, "could not stop process ", s->name, ": ", e.what());
  }
}

op<void> process::start() { return {state_->rt, detail::start_impl(state_)}; }
op<void> process::join() { return {state_->rt, detail::join_void(state_)}; }
op<bool> process::join(std::chrono::milliseconds timeout) { return {state_->rt, detail::join_impl(state_, timeout)}; }
op<void> process::terminate() { return {state_->rt, detail::terminate_impl(state_)}; }

bool process::is_alive() const noexcept {
  auto st = state_->state.load();
  return st == detail::phase::starting || st == detail::phase::running;
}
std::optional<int> process::exitcode() const noexcept {
  if (state_->state.load() != detail::phase::ended) return std::nullopt;
  return state_->exit_code.load();
}
std::optional<remote_error> process::exception() const {
  if (state_->state.load() != detail::phase::ended) return std::nullopt;
  return state_->raised;
}
int process::pid() const noexcept { return state_->pid.load(); }
const std::string& process::name() const noexcept { return state_->name; }
void process::set_name(std::string name) {
  if (state_->state.load() != detail::phase::created)
    throw error(errc::already_started, "set_name on process " + state_->name + " after start()");
  state_->name = std::move(name);
}

process_info current_process() { return {detail::process_name(), static_cast<int>(::getpid()), is_worker()}; }

std::vector<int> active_children() {
  auto rt = context::default_context().runtime();
  std::vector<int> pids;
  detail::run_on_loop(*rt, [&] { pids = rt->live_pids(); });
  return pids;
}

int cpu_count() noexcept {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

}  // namespace fiber
