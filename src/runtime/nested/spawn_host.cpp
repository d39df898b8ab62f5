#include "runtime/nested/spawn_host.hpp"

#include <asio/post.hpp>
#include <csignal>

#include "core/log.hpp"
#include "core/worker_env.hpp"
#include "fiber/error.hpp"
#include "runtime/master_side.hpp"

namespace fiber::detail {

void spawn_host::on_message(const std::string& peer, const header& h, multipart&& payload) {
  if (h.type == spawn_wire::start) {
    start(peer, h.request, payload.empty() ? std::string() : payload[0].to_string());
    return;
  }
  auto* j = find(peer, h.request);
  if (!j) return;  // it ended meanwhile
  if (h.type == spawn_wire::signal)
    j->signal(static_cast<int>(h.aux));
  else if (h.type == spawn_wire::expect_exit)
    j->expect_exit();
  else if (h.type == spawn_wire::reported_pid)
    j->reported_pid(static_cast<int>(h.aux));
  else
    logf(log_level::error, "unexpected message kind ", int(h.type), " for the spawn service from ", peer, "; ignored");
}

void spawn_host::start(const std::string& peer, std::uint64_t request, const std::string& text) {
  spawn_wire::child_news refused;
  refused.code = -1;
  std::unique_ptr<job> j;
  auto handle = ++next_handle_;
  std::uint64_t parent = 0;
  int depth = 2;  // asked by a child of this master, at depth 1
  try {
    auto spec = spawn_wire::decode_spec(text, parent);
    // The asker is the link's own child or a process started through that link, never another's.
    if (parent != 0) {
      auto p = children_.find(parent);
      if (p == children_.end() || p->second.peer != peer)
        throw error(errc::protocol_error, "it names as its parent a process that was not started through " + peer);
      depth = p->second.depth + 1;
    }
    if (auto why = spawn_refusal(spec, depth, limits_); !why.empty()) {
      logf(log_level::warn, "refused to start ", spec.name, " for child ", peer, ": ", why);
      throw error(errc::spawn_failed, why);
    }
    // Its own children name it as their parent; its name is unique among the engine's (a
    // container's name is the job's and the process's, and each level counts its own).
    spec.env.emplace_back(env_spawn_handle, std::to_string(handle));
    spec.name += "-n" + std::to_string(handle);
    auto& b = master_.the_backend();
    b.check_capacity(spec);
    j = b.spawn(spec);
  } catch (const error& e) {
    refused.detail = std::string("the top master could not start it: ") + e.what();
    refused.never_fits = e.code() == make_error_code(errc::unsatisfiable);
  } catch (const std::exception& e) {
    refused.detail = std::string("the top master could not start it: ") + e.what();
  }
  if (!j) {
    tell(peer, request, spawn_wire::event::exited, refused);
    return;
  }
  auto* raw = j.get();
  children_.emplace(handle, child{std::move(j), peer, request, parent, depth});
  asked_[{peer, request}] = handle;
  auto weak = weak_from_this();
  raw->when_identified([weak, peer, request, raw] {
    if (auto self = weak.lock()) self->tell(peer, request, spawn_wire::event::identified, {.pid = raw->pid()});
  });
  raw->when_running([weak, peer, request] {
    if (auto self = weak.lock()) self->tell(peer, request, spawn_wire::event::running, {});
  });
  raw->on_exit([weak, handle](int code) {
    if (auto self = weak.lock()) self->ended(handle, code);
  });
}

void spawn_host::ended(std::uint64_t handle, int code) {
  auto it = children_.find(handle);
  if (it == children_.end()) return;
  auto& c = it->second;
  tell(c.peer, c.request, spawn_wire::event::exited,
       {.pid = c.the_job->pid(),
        .code = code,
        .detail = c.the_job->exit_detail(),
        .never_fits = c.the_job->never_fits(),
        .memory = c.the_job->memory_stopped()});
  // What it started ends with it, as a master's children end with their master.
  end_children_of(handle);
  asked_.erase({c.peer, c.request});
  // Not inside the job's own callback: it is destroyed after it returns.
  auto done = std::shared_ptr<job>(std::move(c.the_job));
  children_.erase(it);
  asio::post(master_.io(), [done] {});
}

void spawn_host::end_now(std::uint64_t handle) noexcept {
  auto it = children_.find(handle);
  if (it == children_.end()) return;
  end_children_of(handle);
  // Now, as the master's own children are killed and reaped when it lets them go: a pool that
  // terminates its workers leaves nothing of them running, nested ones included.
  auto c = std::move(it->second);
  children_.erase(it);
  asked_.erase({c.peer, c.request});
  c.the_job->kill_and_reap();
  tell(c.peer, c.request, spawn_wire::event::exited, {.pid = c.the_job->pid(), .code = -SIGKILL});
}

void spawn_host::end_children_of(std::uint64_t parent) noexcept {
  std::vector<std::uint64_t> theirs;
  for (auto& [h, c] : children_)
    if (c.parent == parent) theirs.push_back(h);
  for (auto h : theirs) end_now(h);
}

void spawn_host::on_peer_gone(const std::string& peer) noexcept {
  // A child of this master went: everything asked for through it ends (its subtree).
  std::vector<std::uint64_t> theirs;
  for (auto& [h, c] : children_)
    if (c.peer == peer) theirs.push_back(h);
  for (auto h : theirs) end_now(h);
}

void spawn_host::on_shutdown() noexcept {
  for (auto& [h, c] : children_) {
    logf(log_level::warn, "nested child pid ", c.the_job->pid(), " still running at shutdown: killed");
    c.the_job->kill_and_reap();
  }
  children_.clear();
  asked_.clear();
}

void spawn_host::tell(const std::string& peer, std::uint64_t request, spawn_wire::event e,
                      const spawn_wire::child_news& news) {
  // A peer that is gone hears nothing: its subtree is being ended.
  (void)master_.try_send_to_child(
      peer, make_message(spawn_wire::news,
                         {.channel = spawn_wire::service_id, .request = request, .aux = static_cast<std::uint32_t>(e),
                          .flags = flag_reply},
                         spawn_wire::encode(news)));
}

job* spawn_host::find(const std::string& peer, std::uint64_t request) {
  auto it = asked_.find({peer, request});
  if (it == asked_.end()) return nullptr;
  auto c = children_.find(it->second);
  return c == children_.end() ? nullptr : c->second.the_job.get();
}

}  // namespace fiber::detail
