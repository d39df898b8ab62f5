#include "runtime/worker_side.hpp"

#include <algorithm>
#include <cstdlib>

#include "core/log.hpp"
#include "core/worker_env.hpp"
#include "fiber/error.hpp"
#include "runtime/links/direct_connect.hpp"
#include "runtime/links/direct_listener.hpp"
#include "runtime/worker_exit.hpp"
#include "runtime/links/link_pulse.hpp"
#include "transport/master_watch.hpp"

namespace fiber::detail {

worker_side::worker_side(event_loop& loop, zmq_context& zctx, const fiber::config& cfg, const job_keys& keys,
                         const std::string& master_endpoint, const std::string& token, pending_gets& gets,
                         service_registry& services)
    : loop_(loop), zctx_(zctx), keys_(keys), cfg_(cfg), gets_(gets), services_(services) {
  connect(master_endpoint, token);
}

void worker_side::master_lost(std::uint64_t link) {
  if (master_lost_) return master_lost_(link);
  exit_worker(exit_master_lost);
}

void worker_side::relink(job_keys keys, const std::string& master_endpoint, const std::string& token) {
  master_watch_.reset();  // its thread ends here, before the generation changes under it
  ++generation_;         // what the old connection still says is not heard
  pulse_.reset();
  if (link_) link_->close();
  if (upstream_) upstream_->close();
  link_.reset();
  upstream_.reset();
  link_started_ = false;
  send_failure_ = {};
  {
    // What the old master sent and the service loop has not taken (a task behind the one that
    // ran) belongs to a master that is gone: the new one gives its own work.
    std::lock_guard lock(inbox_mutex_);
    inbox_.clear();
  }
  keys_ = std::move(keys);
  connect(master_endpoint, token);
}

void worker_side::connect(const std::string& master_endpoint, const std::string& token) {
  const auto& keys = keys_;
  // The pulse that calls it is this side's own, and goes before it.
  auto lost = [this, generation = generation_] {
    if (generation == generation_) master_lost(generation);
  };
  if (const char* hub = std::getenv(env_hub); hub && *hub) {
    try {
      link_ = connect_hub_link(loop_.io(), hub, token, keys.password,
                               std::chrono::milliseconds(std::min(cfg_.start_timeout_ms, hub_patience_ms)));
      // The hub closes the link of a child that stopped speaking, as the master does over TLS.
      pulse_ = std::make_unique<link_pulse>(link_, std::chrono::milliseconds(cfg_.heartbeat_interval_ms),
                                            std::chrono::milliseconds(cfg_.heartbeat_timeout_ms),
                                            lost);
      return;
    } catch (const std::system_error& e) {
      // Its host has no hub (one pending behind a full node, one that failed): the master takes
      // this child's own link as well.
      logf(log_level::info, e.what(), "; linking to the master directly");
    }
  }
  if (master_endpoint.starts_with(direct_scheme)) {
    try {
      // The master answers a greeting as soon as its loop reads it, or closes an unproven link
      // after start_timeout_ms (at most twice direct_listener's proof limit).
      link_ = connect_direct_link(loop_.io(), master_endpoint, token, keys.password,
                                  std::chrono::milliseconds(cfg_.start_timeout_ms) + 2 * direct_listener::proof_limit);
    } catch (const std::system_error& e) {
      logf(log_level::error, "cannot reach the master at ", master_endpoint, ": ", e.what());
      master_lost(generation_);
    }
    return;
  }
  if (master_endpoint.starts_with(tls_scheme)) {
    try {
      link_ = connect_tls_link(loop_.io(), master_endpoint, token, tls_session::key_for(keys.client_secret),
                               std::chrono::milliseconds(cfg_.start_timeout_ms),
                               std::chrono::milliseconds(cfg_.heartbeat_timeout_ms));
    } catch (const std::exception& e) {
      logf(log_level::error, "cannot reach the master at ", master_endpoint, ": ", e.what());
      master_lost(generation_);
    }
    pulse_ = std::make_unique<link_pulse>(link_, std::chrono::milliseconds(cfg_.heartbeat_interval_ms),
                                          std::chrono::milliseconds(cfg_.heartbeat_timeout_ms),
                                          lost);
    return;
  }
  zmq::socket_t s(zctx_.get(), zmq::socket_type::dealer);
  // A child on the master's host reaches it over a unix socket and dies with it (the
  // parent-death signal): its own heartbeats would only wake both sides every interval. The
  // master's heartbeats still tell it when this child stops answering (it answers them).
  configure_socket(s, cfg_, /*heartbeats=*/!master_endpoint.starts_with("ipc://"));
  // The only peer is the master, proven by the job's keys; its config (and so its
  // max_message_bytes, which senders check) arrives only in the handshake, after this socket
  // exists: a default limit here silently dropped larger messages a raised limit allowed.
  s.set(zmq::sockopt::maxmsgsize, std::int64_t{-1});
  s.set(zmq::sockopt::routing_id, token);
  secure_as_client(s, keys);
  s.set(zmq::sockopt::linger, 10000);  // what the worker sent reaches the master before it exits
  upstream_ = std::make_shared<zmq_channel>(loop_.io(), std::move(s));
  // A child that cannot see its master's process (no parent pid: a container, a pod, a Slurm
  // job) takes the master for gone when the connection stays down (on the watch's thread). The
  // watch is attached before connecting: a handshake done before it would never be seen, and the
  // worker would leave a live master.
  if (!std::getenv(env_parent_pid))
    master_watch_ = std::make_unique<master_watch>(zctx_.get(), upstream_->socket(),
                                                   std::chrono::milliseconds(cfg_.heartbeat_timeout_ms), lost);
  upstream_->socket().connect(master_endpoint);
}

worker_side::~worker_side() = default;

void worker_side::retune() {
  if (pulse_)
    pulse_->retune(std::chrono::milliseconds(cfg_.heartbeat_interval_ms), std::chrono::milliseconds(cfg_.heartbeat_timeout_ms));
}

void worker_side::send_upstream(multipart&& parts) {
  // A worker that is also a master of its own children (nested) runs its loop on a standby thread
  // too: its target's sends (a pool worker's results, its `done`) take the loop first, as the
  // socket and the link belong to whoever runs it.
  if (loop_.has_standby() && !loop_.this_thread_drives())
    return loop_.run_sync([this, &parts] { send_upstream(std::move(parts)); });
  if (activity_) activity_();
  auto ec = link_ ? link_->send(std::move(parts)) : upstream_->send(std::move(parts));
  if (!ec) return;
  if (auto [level, text] = send_failure_.report(ec); !text.empty()) logf(level, text);
}

void worker_side::on_first_message(unique_function<void(std::error_code, multipart)> h) {
  first_message_ = std::move(h);
  receive_next();
}

void worker_side::push_service_message(multipart m) {
  {
    std::lock_guard lock(inbox_mutex_);
    inbox_.push_back(std::move(m));
  }
  loop_.notify_done(inbox_filled_);
}

multipart worker_side::next_service_message() {
  std::unique_lock lock(inbox_mutex_);
  if (inbox_.empty()) {
    inbox_filled_ = false;
    lock.unlock();
    // Set by the loop (on this thread inside drive, or on the standby thread of a worker that is
    // also a master of its own children) when a service message arrives.
    loop_.drive(
        [this] {
          std::lock_guard held(inbox_mutex_);
          if (!inbox_.empty()) loop_.notify_done(inbox_filled_);
        },
        inbox_filled_);
    lock.lock();
  }
  auto m = std::move(inbox_.front());
  inbox_.pop_front();
  return m;
}

void worker_side::put(std::uint64_t channel, multipart&& payload) {
  send_upstream(make_message(kind::put, {.channel = channel}, std::move(payload)));
}

void worker_side::get(std::uint64_t channel, std::uint64_t request) {
  send_upstream(make_message(kind::get, {.channel = channel, .request = request}));
}

void worker_side::cancel_get(std::uint64_t channel, std::uint64_t request) {
  // The master answers with `cancelled`, or with the item if it was already on its way.
  send_upstream(make_message(kind::cancel_get, {.channel = channel, .request = request}));
}

void worker_side::maker_gone(std::uint32_t prefix) {
  send_upstream(make_message(kind::maker_gone, {.aux = prefix}));
}

void worker_side::receive_next() {
  if (link_) {
    if (link_started_) return;  // it reads until it closes
    link_started_ = true;
    // The master speaks again only once this worker answered: no read at once after a message.
    link_->reader().defer_after_drain();
    link_->start(
        // A read of the old link that completed before a relink may still be delivered after
        // it (its handler was queued): what the old master sent is not heard, as its close.
        [weak = weak_from_this(), generation = generation_](multipart m) {
          auto self = weak.lock();
          if (self && !self->closed_ && generation == self->generation_) self->handle(std::move(m));
        },
        [weak = weak_from_this(), generation = generation_](std::error_code ec) {
          auto self = weak.lock();
          if (!self || self->closed_ || generation != self->generation_) return;
          // The master closed its end or died: nobody is left to work for (unless a master
          // taking a durable run up may come for this worker: master_lost says).
          logf(log_level::debug, "the link to the master closed (", ec.message(), ")");
          self->master_lost(generation);
        });
    return;
  }
  upstream_->async_receive([weak = weak_from_this(), generation = generation_](std::error_code ec, multipart m) {
    auto self = weak.lock();
    if (ec || !self || self->closed_ || generation != self->generation_) return;
    self->handle(std::move(m));
    self->receive_next();
  });
}

void worker_side::handle(multipart&& m) {
  if (activity_) activity_();
  auto h = m.empty() ? std::nullopt : parse_header(m[0]);
  if (!h) {
    logf(log_level::error, "malformed message from the master (", m.size(), " frames); ignored");
    return;
  }
  if (is_service_kind(h->type) && !(h->flags & flag_reply)) {
    push_service_message(std::move(m));  // a command for this worker's service loop
    return;
  }
  multipart payload;
  for (std::size_t i = 1; i < m.size(); ++i) payload.push_back(std::move(m[i]));
  if (is_service_kind(h->type) || h->type == kind::service_gone) {  // a reply for a local service
    if (pass_reply_ && pass_reply_(*h, payload)) return;  // ... or for a child's call passed up
    if (auto svc = services_.find(h->channel))
      svc->on_message({}, *h, std::move(payload));
    else
      logf(log_level::debug, "reply for service ", h->channel, " nobody waits for; ignored");
    return;
  }
  switch (h->type) {
    case kind::welcome:
    case kind::refuse:
      if (first_message_) {
        auto f = std::move(first_message_);
        first_message_ = nullptr;
        payload.insert(payload.begin(), std::move(m[0]));
        f({}, std::move(payload));
      }
      return;
    case kind::item:
      if (!gets_.contains(h->request)) {
        // Not asked for (any more): give it back rather than lose it.
        logf(log_level::warn, "unrequested message on channel ", h->channel, " returned to its queue");
        put(h->channel, std::move(payload));
        return;
      }
      gets_.complete(h->request, {}, std::move(payload), true);
      return;
    case kind::cancelled: gets_.complete(h->request, make_error_code(errc::timeout), {}, true); return;
    case kind::probe: return;
    case kind::failure: {
      auto text = payload.empty() ? std::string("(no detail)") : payload[0].to_string();
      // A failure that names its error (a read of a queue whose maker has ended) is that
      // read's answer; one that does not is the master's report of something wrong.
      if (!h->aux) logf(log_level::error, "the master reported: ", text);
      if (h->request)
        gets_.complete(h->request, make_error_code(h->aux ? static_cast<errc>(h->aux) : errc::protocol_error), {}, true);
      return;
    }
    default: logf(log_level::error, "unexpected message kind ", int(h->type), " from the master; ignored");
  }
}

void worker_side::shutdown() noexcept {
  if (closed_) return;
  closed_ = true;
  gets_.fail_all(make_error_code(errc::closed));
  master_watch_.reset();
  pulse_.reset();
  if (link_) {
    // What this worker sent (its results, its `done`) reaches the master before it exits.
    if (!link_->flush(std::chrono::milliseconds(10000)))
      logf(log_level::warn, "the master did not take this worker's last messages within 10 s");
    link_->close();
    return;
  }
  upstream_->close();
}

}  // namespace fiber::detail
