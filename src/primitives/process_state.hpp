// The master's record of one child process: shared by fiber::process and the pool.
#pragma once
#include <asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <csignal>

#include "fiber/meta.hpp"
#include "fiber/process.hpp"
#include "core/log.hpp"
#include "core/build_id.hpp"
#include "core/remote_failure.hpp"
#include "runtime/runtime.hpp"
#include "runtime/init.hpp"

namespace fiber::detail {

enum class phase { created, starting, running, ended };

struct process_state final : child_endpoint, std::enable_shared_from_this<process_state> {
  std::shared_ptr<runtime> rt;
  std::string name;
  encoded_call call;
  meta needs;  // from FIBER_META of the target, or the pool's worker needs
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

  /// The child's pid; a container backend learns it after the start (`child` is set before
  /// `state` leaves `starting`).
  int current_pid() const noexcept {
    if (int p = pid.load()) return p;
    auto st = state.load();
    return (st == phase::running || st == phase::ended) && child ? child->pid() : 0;
  }

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
      rt->master().send_to_child(routing_id, make_message(kind::refuse, {}, problem));
      logf(log_level::error, "refused ", name, ": ", problem);
      complete_start(make_error_code(problem.starts_with("worker binary") ? errc::binary_mismatch : errc::protocol_error),
                     "cannot start " + name + ": " + problem);
      return;
    }
    boost::json::object snapshot;
    for (auto& [k, v] : rt->cfg().items()) snapshot[k] = v;
    auto cfg_text = boost::json::serialize(snapshot);
    auto welcome = make_message(kind::welcome, {}, cfg_text, as_pod(call.function_id), call.args);
    if (auto* pid_field = hello.if_contains("pid"); pid_field && pid_field->is_int64())
      child->reported_pid(static_cast<int>(pid_field->as_int64()));
    state = phase::running;
    // The child runs its target once welcomed, so it is welcomed, and start() completes, once
    // pid() has its value on every backend: a container that ran and ended before the engine
    // was asked for its pid reported 0 (seen under load).
    child->when_identified([weak = weak_from_this(), welcome = std::move(welcome)]() mutable {
      auto self = weak.lock();
      if (!self) return;
      self->rt->master().send_to_child(self->routing_id, std::move(welcome));
      self->complete_start({}, {});
    });
  }

  void on_done(bool threw, const std::string& detail) override {
    done_received = true;
    if (!exited && child) child->expect_exit();
    if (threw) {
      auto f = remote_failure::decode(detail);
      if (f.in_fiber) logf(log_level::warn, name, " reported its end in an unreadable form: ", f.message);
      raised.emplace(f.in_fiber ? "fiber::error" : f.type, f.message, name);
    }
    if (exited) finish();
  }

  void on_exit(int code) {
    exited = true;
    exit_code = code;
    rt->master().untrack_job(child.get());
    if (on_started) {
      auto detail = child->exit_detail();
      complete_start(make_error_code(errc::spawn_failed),
                     "process " + name + " (pid " + std::to_string(child->pid()) + ") exited with code " +
                         std::to_string(code) + " before its handshake" +
                         (detail.empty() ? "; see its log (config log_file) or stderr" : ": " + detail));
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
    rt->master().detach_child(routing_id);
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
    rt->master().untrack_job(child.get());
    exited = true;
    exit_code = -SIGKILL;
    complete_start(make_error_code(errc::spawn_failed), "process " + name + " was killed while starting");
    finish();
  }
};

std::shared_ptr<process_state> make_process_state(std::shared_ptr<runtime> rt, encoded_call call);

/// On the loop thread: spawns the child. `done` is taken (moved from) and called on the loop once
/// the child passed its handshake (no error) or failed to. Throws, leaving `done` alone, when the
/// child cannot even be spawned.
void begin_start(const std::shared_ptr<process_state>& s, unique_function<void(std::error_code, std::string)>& done);

}  // namespace fiber::detail
