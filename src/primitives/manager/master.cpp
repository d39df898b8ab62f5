#include "primitives/manager/master.hpp"

#include <asio/post.hpp>
#include <cstring>
#include <deque>
#include <map>
#include <unordered_map>

#include "core/message_limit.hpp"
#include "fiber/manager.hpp"
#include "primitives/manager/wire.hpp"
#include "core/log.hpp"
#include "primitives/child_process.hpp"

namespace fiber::detail {
namespace {
std::atomic<int> next_manager_number{1};
}  // namespace


void manager_core::start() {
  if (stopping_) return;  // shut down before it could start
  rt_->services().add(id_, weak_from_this());
  encoded_call call;
  const auto& entry = require_registered(&manager_server_main);
  call.function_id = entry.id;
  call.function_name = entry.name;
  call.args.value(std::make_tuple(id_));
  proc_ = child_process::make(rt_, std::move(call));
  proc_->set_name("Manager-" + std::to_string(next_manager_number++));
  proc_->set_owned();
  unique_function<void(std::error_code, std::string)> done = [weak = weak_from_this()](std::error_code ec,
                                                                                     const std::string& what) {
    if (auto self = weak.lock()) self->on_started(ec, what);
  };
  try {
    proc_->start(done);
  } catch (const error& e) {
    on_started(e.code(), e.what());
    return;
  }
  proc_->when_ended([weak = weak_from_this()] {
    if (auto self = weak.lock()) self->on_server_ended();
  });
}

std::shared_ptr<completion<message>> manager_core::call(const object_ref& ref, std::uint64_t method, writer& args) {
  auto c = std::make_shared<completion<message>>();
  auto relay = next_relay_++;
  pending_.emplace(relay, pending{{}, 0, c});
  forward(relay, call_frames(ref, method, args));
  return c;
}

void manager_core::when_ready(unique_function<void(std::exception_ptr)> f) {
  if (started_ || dead_) return f(dead_ ? std::make_exception_ptr(error(errc::server_lost, dead_text_)) : nullptr);
  ready_waiters_.push_back(std::move(f));
}

void manager_core::shutdown(unique_function<void()> done) {
  // A server whose spawn failed at once never ran and will never end: nothing to wait for
  // (waiting for it hung ~manager after the backend could not be reached).
  if (!proc_ || proc_->state() == child_process::phase::ended || proc_->state() == child_process::phase::created) {
    stopping_ = true;
    if (!dead_) {
      dead_ = true;
      dead_text_ = "the manager was shut down: its objects are gone";
    }
    fail_all();
    return done();
  }
  proc_->when_ended(std::move(done));
  if (stopping_) return;
  stopping_ = true;
  if (started_) {
    rt_->master().send_to_child(proc_->peer(), make_message(manager_kind::stop, {.channel = id_}));
  }
  kill_timer_ = std::make_unique<asio::steady_timer>(rt_->io(), std::chrono::milliseconds(started_ ? rt_->cfg().terminate_grace_ms : 0));
  kill_timer_->async_wait([weak = weak_from_this()](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || !self->proc_) return;
    if (self->proc_->state() != child_process::phase::ended) self->proc_->kill_now();
  });
}

void manager_core::on_message(const std::string& peer, const header& h, multipart&& payload) {
  if (h.type == manager_kind::call) {
    // From a child holding a proxy: relay under an id of ours.
    auto relay = next_relay_++;
    pending_.emplace(relay, pending{peer, h.request, nullptr});
    forward(relay, std::move(payload));
  } else if (h.type == manager_kind::reply) {
    if (!proc_ || peer != proc_->peer()) return;
    on_reply(h, std::move(payload));
  }
}

void manager_core::on_reply(const header& h, multipart&& payload) {
  auto it = pending_.find(h.request);
  if (it == pending_.end()) return;
  auto p = std::move(it->second);
  pending_.erase(it);
  if (p.local) {
    complete_from_reply(*p.local, h.aux, std::move(payload));
  } else {
    rt_->master().send_to_child(
        p.peer, make_message(manager_kind::reply, {.channel = id_, .request = p.call, .aux = h.aux, .flags = flag_reply}, std::move(payload)));
  }
}

void manager_core::send_to_server(multipart&& m, std::uint64_t relay) {
  if (auto ec = rt_->master().try_send_to_child(proc_->peer(), std::move(m)))
    fail(relay, errc::server_lost, "cannot reach the manager's server " + proc_->name() + ": " + ec.message());
}

void manager_core::flush_waiting() {
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& m : waiting) {
    auto relay = header_of(m, "a manager's caller").request;
    send_to_server(std::move(m), relay);
  }
  notify_ready();
}

void manager_core::forward(std::uint64_t relay, multipart&& body) {
  if (dead_) return fail(relay, errc::server_lost, dead_text_);
  if (stopping_) return fail(relay, errc::server_lost, "the manager is shutting down: its objects are gone");
  auto m = make_message(manager_kind::call, {.channel = id_, .request = relay}, std::move(body));
  if (!ready_to_send()) {
    waiting_.push_back(std::move(m));
    return;
  }
  send_to_server(std::move(m), relay);
}

void manager_core::fail(std::uint64_t relay, errc code, const std::string& what) {
  auto it = pending_.find(relay);
  if (it == pending_.end()) return;
  auto p = std::move(it->second);
  pending_.erase(it);
  if (p.local) {
    p.local->set_error(std::make_exception_ptr(error(code, what)));
    return;
  }
  auto text = failure_reply(code, what);
  rt_->master().send_to_child(
      p.peer, make_message(manager_kind::reply, {.channel = id_, .request = p.call, .aux = reply_failed, .flags = flag_reply}, text));
}

void manager_core::on_started(std::error_code ec, const std::string& what) {
  if (ec) {
    dead_ = true;
    dead_text_ = "the manager's server could not start: " + what;
    fail_all();
    return;
  }
  started_ = true;
  if (ready_to_send()) flush_waiting();
}

void manager_core::on_server_ended() {
  if (kill_timer_) kill_timer_->cancel();
  if (!dead_) {
    dead_ = true;
    int code = proc_->ending().exit_code().value_or(0);
    auto how = code < 0 ? "killed by signal " + std::to_string(-code) : "exit code " + std::to_string(code);
    dead_text_ = stopping_ ? "the manager was shut down: its objects are gone"
                           : "the manager's server " + proc_->name() + " (pid " + std::to_string(proc_->pid()) +
                                 ") ended (" + how + "): the objects it hosted are gone";
    // Ended with its context (stopped on purpose, or the program's end): no failure to report.
    if (!stopping_) logf(rt_->is_shut_down() ? log_level::debug : log_level::warn, dead_text_);
  }
  fail_all();
}

void manager_core::fail_all() {
  waiting_.clear();
  std::vector<std::uint64_t> relays;
  relays.reserve(pending_.size());
  for (auto& [relay, p] : pending_) relays.push_back(relay);
  for (auto relay : relays) fail(relay, errc::server_lost, dead_text_);
  notify_ready();
}

void manager_core::notify_ready() {
  auto waiters = std::move(ready_waiters_);
  ready_waiters_.clear();
  for (auto& f : waiters) f(dead_ ? std::make_exception_ptr(error(errc::server_lost, dead_text_)) : nullptr);
}


std::shared_ptr<completion<message>> create_object(const std::shared_ptr<manager_core>& core, std::uint64_t ctor,
                                                   writer& args) {
  // Through the core itself: the server may not be registered as a service yet.
  return core->call(object_ref{core->id(), ctor, false}, create_method, args);
}

object_handle created_object(const std::shared_ptr<manager_core>& core, const message& reply) {
  return own_object(core->rt(), object_ref{core->id(), decode_message<std::uint64_t>(reply), core->async()});
}

int manager_core::pid() const { return proc_ ? proc_->pid() : 0; }

// ---- the callers in this process

bool manager_here(runtime& rt, std::uint64_t manager) {
  return std::dynamic_pointer_cast<manager_core>(rt.services().find(manager)) != nullptr;
}

std::shared_ptr<completion<message>> call_at_master(runtime& rt, const object_ref& ref, std::uint64_t method,
                                                    writer& args) {
  auto core = std::dynamic_pointer_cast<manager_core>(rt.services().find(ref.manager));
  if (!core && (ref.manager >> 32) != 0)  // its id carries the prefix of the child that made it
    return failed_call(errc::server_lost,
                       "manager " + std::to_string(ref.manager) +
                           " was made by a child, and its proxies are called in that child and the processes below "
                           "it, not above it (or it has been shut down): make the manager in the master to share it "
                           "with the whole tree");
  if (!core)
    return failed_call(errc::server_lost, "manager " + std::to_string(ref.manager) +
                                              " has been shut down (or its server ended): its objects are gone");
  return core->call(ref, method, args);
}

}  // namespace fiber::detail
