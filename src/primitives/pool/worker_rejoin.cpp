#include "primitives/pool/worker_rejoin.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <asio/post.hpp>
#include <boost/json.hpp>
#include <csignal>
#include <cstdlib>
#include <string>

#include "backend/backend.hpp"
#include "core/log.hpp"
#include "core/worker_env.hpp"
#include "primitives/pool/wire.hpp"
#include "runtime/links/reattach_point.hpp"
#include "runtime/runtime.hpp"
#include "runtime/worker_exit.hpp"
#include "runtime/worker_hello.hpp"
#include "transport/reachable_address.hpp"

namespace fiber::detail {

std::unique_ptr<worker_rejoin> worker_rejoin::arm(runtime& rt, std::uint64_t pool_id) {
  const auto& cfg = rt.cfg();
  if (!workers_wait_for_next_master(cfg) || rt.depth() != 1) return nullptr;
  // A child of the master on its host (the parent's pid is in its environment): the master's end
  // is its process's, which a pidfd shows, and its point an abstract unix socket. A child of an
  // engine (a container, a pod, a Slurm job) hears of the end from its link, and listens on TCP
  // at the address its master's network reaches. A host hub's child links through the hub,
  // whose end is its own: it ends with it as before.
  auto parent = env_or_empty(env_parent_pid);
  bool here = !parent.empty();
  if ((here && std::to_string(::getppid()) != parent) || !env_or_empty(env_hub).empty()) return nullptr;
  try {
    return std::unique_ptr<worker_rejoin>(new worker_rejoin(rt, pool_id, here ? std::string() : reachable_address()));
  } catch (const std::exception& e) {
    logf(log_level::warn, "this worker cannot wait for a master taking the run up (", e.what(),
         "); it ends with its master");
    return nullptr;
  }
}

worker_rejoin::worker_rejoin(runtime& rt, std::uint64_t pool_id, const std::string& tcp_host)
    : rt_(rt), pool_id_(pool_id), here_(tcp_host.empty()) {
  reattach_point::handlers h{
      [this] { return held_.state(pool_id_.load()); },
      [this](const std::string& record) { return relink(record); },
      [] { exit_worker(exit_master_lost); },
      [this] { held_.orphan(); }};
  point_ = std::make_unique<reattach_point>(here_ ? static_cast<int>(::getppid()) : 0,
                                            std::chrono::milliseconds(rt_.cfg().reattach_grace_ms), std::move(h), tcp_host);
  // Its link closing says the master is gone too (the point also watches its process here); a
  // link a master taking the run up replaced says nothing (the link after the Nth relink is N).
  loss_->point = point_.get();
  rt_.worker().on_master_lost([loss = loss_](std::uint64_t link) {
    {
      std::lock_guard lock(loss->mutex);
      if (loss->point) {
        if (link >= loss->relinks) loss->point->master_gone();
        return;
      }
    }
    exit_worker(exit_master_lost);  // this part is gone: as a worker without one
  });
  if (here_) {
    // The point outlives the master: the kernel must not end this process with it.
    ::prctl(PR_SET_PDEATHSIG, 0);
    if (std::to_string(::getppid()) != env_or_empty(env_parent_pid)) point_->master_gone();  // it died meanwhile
  }
  rt_.worker().send_upstream(make_message(pool_kind::reattach_at, {.channel = pool_id}, std::string_view(point_->name()),
                                          std::string_view(point_->secret())));
}

worker_rejoin::~worker_rejoin() {
  std::lock_guard lock(loss_->mutex);
  loss_->point = nullptr;  // the point goes with this part; the handler stays with the link
}

int worker_rejoin::relink(const std::string& record) {
  // The record comes from a master that proved the secret: it is read, and still checked.
  auto r = boost::json::parse(record).as_object();
  auto text = [&](const char* key) { return std::string(r.at(key).as_string()); };
  auto endpoint = text("endpoint"), token = text("token"), nonce = text("nonce"), credentials = text("credentials");
  auto pool = static_cast<std::uint64_t>(r.at("pool").as_int64());
  auto master_pid = static_cast<int>(r.at("master_pid").as_int64());
  auto keys = job_keys::from_worker_text(credentials);
  logf(log_level::info, "a master taking the run up (pid ", master_pid, ") links this worker again");
  if (!here_) master_pid = 0;  // another host's, or another namespace's: its link says when it is gone
  {
    // From here the old link's end (its watch may still say it) is not the new master's.
    std::lock_guard lock(loss_->mutex);
    ++loss_->relinks;
  }
  // Posted, never run here: the worker's own thread drives its loop (its link, its sends) once
  // its item is done; this thread only waits at the point.
  asio::post(rt_.io(), [this, alive = std::weak_ptr<bool>(alive_), keys = std::move(keys), endpoint, token, nonce,
                        pool]() mutable {
    if (!alive.lock()) return;
    rt_.worker().relink(std::move(keys), endpoint, token);
    rt_.worker().on_first_message([this, pool](std::error_code, multipart answer) {
      if (header_of(answer, "the master").type == kind::refuse) {
        logf(log_level::error, "the master taking the run up refused this worker: ",
             answer.size() > 1 ? answer[1].to_string() : std::string());
        exit_worker(exit_refused);
      }
      try {
        rt_.replace_config(welcome_config(answer));
      } catch (const std::exception& e) {
        logf(log_level::warn, "the new master's config is unreadable (", e.what(), "); keeping the last one");
      }
      held_.adopted();  // the new master's tasks run
      rt_.worker().push_service_message(make_message(pool_kind::rejoined, {.channel = pool}));
    });
    send_hello(rt_, nonce);
  });
  return master_pid;
}

std::uint64_t worker_rejoin::rejoined(const header& h, int credit) {
  pool_id_ = h.channel;
  for (auto& m : held_.copies()) {
    // The results as they were sent, under the new master's id of the pool; their tasks are the
    // last master's, which the new one finds in its journal.
    auto old = parse_header(m[0]);
    m[0] = make_header(old->type, h.channel, old->request, old->aux, old->flags);
    rt_.worker().send_upstream(std::move(m));
  }
  // Last: the new master reads what comes from here on as of its own tasks.
  rt_.worker().send_upstream(make_message(pool_kind::ready, {.channel = h.channel, .aux = static_cast<std::uint32_t>(credit)}));
  return h.channel;
}

}  // namespace fiber::detail
