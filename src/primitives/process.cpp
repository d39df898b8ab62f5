#include "fiber/process.hpp"

#include <asio/experimental/as_tuple.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <sched.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <csignal>

#include "primitives/process_state.hpp"
#include "core/message_limit.hpp"

namespace fiber {
namespace detail {

namespace {
std::atomic<std::uint64_t> next_token{1};
std::atomic<int> next_number{1};

template <class Token>
auto async_started(std::shared_ptr<process_state> s, Token&& token) {
  // `s` as an argument of the initiation, not a capture: see await_completion (g++ 12).
  return asio::async_initiate<Token, void(std::error_code, std::string)>(
      [](auto handler, const std::shared_ptr<process_state>& s) {
        auto ex = asio::get_associated_executor(handler, s->rt->executor());
        unique_function<void(std::error_code, std::string)> done =
            [h = std::move(handler), ex](std::error_code ec, std::string d) mutable {
              asio::post(ex, [h = std::move(h), ec, d = std::move(d)]() mutable { h(ec, std::move(d)); });
            };
        try {
          begin_start(s, done);
        } catch (const error& e) {
          done(e.code(), e.what());
        }
      },
      token, s);
}

/// Completes with true once ended, false when `timeout` passed first.
template <class Token>
auto async_ended(std::shared_ptr<process_state> s, std::optional<std::chrono::milliseconds> timeout, Token&& token) {
  return asio::async_initiate<Token, void(bool)>(
      [timeout](auto handler, const std::shared_ptr<process_state>& s) {
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
      token, s);
}

asio::awaitable<void> start_impl(std::shared_ptr<process_state> s) {
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

}  // namespace

void begin_start(const std::shared_ptr<process_state>& s, unique_function<void(std::error_code, std::string)>& done) {
  auto expected = phase::created;
  if (!s->state.compare_exchange_strong(expected, phase::starting))
    throw error(errc::already_started, "process " + s->name + " was already started; create a new process object");
  auto& rt = *s->rt;
  try {
    if (rt.is_shut_down()) throw error(errc::closed, "cannot start " + s->name + ": its fiber context has been stopped");
    if (!rt.is_master())
      throw error(errc::spawn_failed,
                  "starting processes from inside a worker is not supported yet; start them from the master");
    require_init();
    check_message_size("the arguments of " + s->name, s->call.args.total_size(), rt.cfg().max_message_bytes,
                       "send large data through a queue or a pipe in pieces");
    auto endpoint = rt.master().listen();
    s->routing_id = std::to_string(next_token++);
    rt.master().attach_child(s->routing_id, s);
    spawn_spec spec;
    spec.name = s->name;
    spec.job_id = rt.job_id();
    spec.executable = rt.cfg().executable.empty() ? executable_path() : rt.cfg().executable;
    spec.args = {worker_flag};
    spec.env = {{env_token, s->routing_id},
                {env_endpoint, endpoint},
                {env_job, rt.job_id()},
                {env_keys, rt.master().worker_credentials()},
                {env_name, s->name}};
    spec.cpu = s->needs.cpu ? s->needs.cpu : rt.cfg().cpu_per_job;
    spec.memory_mb = s->needs.memory_mb ? s->needs.memory_mb : rt.cfg().mem_per_job;
    spec.gpu = s->needs.gpu;
    s->child = rt.master().the_backend().spawn(spec);
  } catch (...) {
    // Not started: the object may be started again, and nothing is left registered.
    if (!s->routing_id.empty()) rt.master().detach_child(s->routing_id);
    s->state = phase::created;
    throw;
  }
  s->on_started = std::move(done);
  rt.master().track_job(s->child.get());
  s->pid = s->child->pid();
  s->child->on_exit([weak = std::weak_ptr<process_state>(s)](int code) {
    if (auto self = weak.lock()) self->on_exit(code);
  });
  // The handshake deadline counts from when the child runs: a scheduler's queue wait is not the
  // child's fault (a backend that queues fails a hopeless wait itself).
  s->child->when_running([weak = std::weak_ptr<process_state>(s)] {
    auto s = weak.lock();
    if (!s || !s->on_started) return;
    s->start_timer = std::make_unique<asio::steady_timer>(s->rt->io(), std::chrono::milliseconds(s->rt->cfg().start_timeout_ms));
    s->start_timer->async_wait([weak](std::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || !self->on_started) return;
      self->complete_start(make_error_code(errc::timeout),
                           "process " + self->name + " did not complete its handshake within start_timeout_ms (" +
                               std::to_string(self->rt->cfg().start_timeout_ms) + " ms); killed");
      self->child->signal(SIGKILL);
    });
  });
}

std::shared_ptr<process_state> make_process_state(std::shared_ptr<runtime> rt, encoded_call call) {
  auto s = std::make_shared<process_state>();
  s->rt = std::move(rt);
  s->name = "Process-" + std::to_string(next_number++);
  s->needs = find_meta(call.function_id);
  s->call = std::move(call);
  return s;
}
}  // namespace detail

process::process(context& ctx, detail::encoded_call call)
    : state_(detail::make_process_state(ctx.runtime(), std::move(call))) {}

process::process(process&&) noexcept = default;
process& process::operator=(process&&) noexcept = default;

process::~process() {
  if (!state_) return;
  auto s = state_;
  auto st = s->state.load();
  if (st != detail::phase::starting && st != detail::phase::running) return;
  detail::logf(log_level::warn, "process ", s->name, " was still running when its process object was destroyed: killed");
  try {
    s->rt->run_sync([s] { s->kill_now(); });
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
int process::pid() const noexcept { return state_->current_pid(); }
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
  rt->run_sync([&] { pids = rt->master().live_pids(); });
  return pids;
}

int cpu_count() noexcept {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

}  // namespace fiber
