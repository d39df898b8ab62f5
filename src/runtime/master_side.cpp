#include "runtime/master_side.hpp"

#include "runtime/nested/nested_relay.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/flight_recorder.hpp"
#include "core/log.hpp"
#include "runtime/worker_side.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

master_side::master_side(asio::io_context& io, zmq::context_t& zctx, const fiber::config& cfg,
                         const std::string& job_id, const job_keys& keys, pending_gets& gets,
                         service_registry& services)
    : io_(io),
      zctx_(zctx),
      cfg_(cfg),
      job_id_(job_id),
      keys_(keys),
      gets_(gets),
      services_(services),
      broker_([this](const channel_reader& r, std::uint64_t channel, multipart& payload, bool may_run_inline) {
        return deliver(r, channel, payload, may_run_inline);
      }) {}

backend& master_side::the_backend() {
  if (forks_) return *forks_;  // hub_workers=fork: the hubs start the children
  if (!backend_) backend_ = make_backend(io_, cfg_, job_id_);
  return *backend_;
}

const std::string& master_side::listen() {
  if (router_ || direct_) return endpoint_;
  if (closed_) throw error(errc::closed, "the fiber context has shut down");
  auto endpoint = the_backend().listen_endpoint(job_id_);
  if (endpoint.starts_with("ipc://") && cfg_.local_transport == "direct" && cfg_.encryption == "auto") {
    listen_direct();
    return endpoint_;
  }
  if (cfg_.hub_workers == "fork" && cfg_.remote_transport != "hub" && endpoint.starts_with("tcp://"))
    throw error(errc::config_error, "hub_workers=fork has the host hubs start the children, and remote_transport is " +
                                        cfg_.remote_transport + ": set remote_transport=hub, or hub_workers=engine");
  if (endpoint.starts_with("tcp://") && cfg_.remote_transport != "zeromq") {
    listen_tls(endpoint);
    if (cfg_.remote_transport == "hub") start_hubs();
    return endpoint_;
  }
  zmq::socket_t s(zctx_, zmq::socket_type::router);
  // Children on this host (a unix socket) are watched through their pidfd, and a stopped one by
  // the state the kernel reports (the pool's probe): heartbeats would only wake every child
  // every interval. Across a network they are how a silent peer is found out.
  configure_socket(s, cfg_, /*heartbeats=*/!endpoint.starts_with("ipc://"));
  s.set(zmq::sockopt::router_mandatory, 1);
  plain_auth_ = endpoint.starts_with("ipc://") && cfg_.encryption == "auto";
  zap_ = std::make_shared<zap_handler>(io_, zctx_, keys_, plain_auth_);
  zap_->start();
  secure_as_server(s, keys_, plain_auth_);
  // A peer that has not finished ZeroMQ's handshake (CURVE or PLAIN, then ZAP) in 10 s is dropped,
  // not after ZeroMQ's default of 30: a stranger's connection costs a descriptor for seconds.
  s.set(zmq::sockopt::handshake_ivl, 10000);
  try {
    s.bind(endpoint);
  } catch (const zmq::error_t& e) {
    throw error(errc::spawn_failed, "cannot listen on " + endpoint + ": " + e.what());
  }
  endpoint_ = the_backend().advertised(s.get(zmq::sockopt::last_endpoint));
  router_ = std::make_shared<zmq_channel>(io_, std::move(s));
  router_->limit_joined_messages(cfg_.max_message_bytes + 4096);
  logf(log_level::debug, "listening on ", endpoint_);
  receive_next();
  return endpoint_;
}

void master_side::make_listener() {
  direct_ = std::make_shared<direct_listener>(
      io_, keys_.password, cfg_.max_message_bytes + stream_link::envelope_bytes,
      std::chrono::milliseconds(cfg_.start_timeout_ms),  // a child greets long before its handshake is due
      [this](const std::string& id) { return children_.contains(id); },
      [weak = weak_from_this()](const std::string& peer, multipart&& m) {
        auto self = weak.lock();
        if (self && !self->closed_) self->handle(peer, std::move(m), 0);
      });
}

void master_side::listen_direct() {
  make_listener();
  direct_->listen("fiber-" + job_id_ + "-" + std::to_string(::getpid()));
  endpoint_ = direct_->endpoint();
  plain_auth_ = true;  // children prove themselves with the password
  logf(log_level::debug, "listening on ", endpoint_);
}

void master_side::listen_tls(const std::string& endpoint) {
  auto hostport = endpoint.substr(std::string_view("tcp://").size());
  auto host = hostport.substr(0, hostport.rfind(':'));
  make_listener();
  auto bound = direct_->listen_tcp(host, tls_session::key_for(keys_.client_secret),
                                   std::chrono::milliseconds(cfg_.heartbeat_interval_ms),
                                   std::chrono::milliseconds(cfg_.heartbeat_timeout_ms));
  auto advertised = the_backend().advertised(bound);
  endpoint_ = std::string(tls_scheme) + advertised.substr(std::string_view("tcp://").size());
  remote_links_ = true;
  logf(log_level::debug, "listening on ", endpoint_);
}

void master_side::start_hubs() {
  auto hosts = the_backend().hub_hosts();
  if (hosts.empty()) {
    logf(log_level::info, "remote_transport=hub: the ", the_backend().name(),
         " backend cannot start work on a given host; children link to the master directly");
    return;
  }
  hubs_ = std::make_unique<host_hubs>(io_, the_backend(), cfg_, job_id_, endpoint_, worker_credentials());
  direct_->accept_hubs([this](const std::string& id) { return hubs_ && hubs_->expected(id); });
  if (cfg_.hub_workers == "fork") {
    forks_ = std::make_shared<hub_forks>(io_, *backend_, direct_, hosts);
    direct_->watch_hubs({.linked = [this](const std::string& hub) {
                           if (forks_ && hubs_) forks_->linked(hubs_->host_of(hub), hub);
                         },
                         .unlinked = [this](const std::string& hub) {
                           if (forks_) forks_->unlinked(hub);
                         },
                         .news = [this](const std::string& hub, const std::string& start, multipart&& parts) {
                           if (forks_) forks_->news(hub, start, std::move(parts));
                         }});
    hubs_->on_given_up([this](const std::string& host, const std::string& why) {
      if (forks_) forks_->given_up(host, why);
    });
  }
  hubs_->start(hosts);
  logf(log_level::debug, "host hubs starting on ", hosts.size(), " host(s)");
}

std::vector<std::string> master_side::endpoints() const {
  if (endpoint_.empty()) return {};
  return {endpoint_};
}

void master_side::receive_next() {
  router_->async_receive([weak = weak_from_this()](std::error_code ec, multipart m) {
    auto self = weak.lock();
    if (ec || !self || self->closed_) return;
    std::string peer = m.empty() ? std::string() : m[0].to_string();  // the router's envelope
    self->handle(peer, std::move(m), 1);
    self->receive_next();
  });
}

void master_side::handle(const std::string& peer, multipart&& m, std::size_t first) {
  auto h = m.size() > first ? parse_header(m[first]) : std::nullopt;
  if (!h) {
    logf(log_level::error, "malformed message from ", peer, " (", m.size() - std::min(first, m.size()),
         " frames): not a fiber header of protocol version ", protocol_version, "; ignored and reported to the sender");
    (void)try_send_to_child(peer, make_message(kind::failure, {}, "malformed message: not a fiber header of this protocol version"));
    return;
  }
  auto payload = [&] {
    multipart p;
    for (std::size_t i = first + 1; i < m.size(); ++i) p.push_back(std::move(m[i]));
    return p;
  };
  if (is_service_kind(h->type)) {
    if (auto svc = services_.find(h->channel); svc && svc->serves_children()) {
      svc->on_message(peer, *h, payload());
    } else if (upstream_ && (h->flags & flag_expects_reply)) {
      // Nested: a call to a service above (a manager's proxy passed down more than one level):
      // passed up under a number of ours, which no call of this process's own uses (their
      // numbers never set the top bit), and its reply comes back down (pass_reply_down).
      auto ours = (std::uint64_t{1} << 63) | ++next_passed_call_;
      passed_calls_[ours] = {peer, h->request};
      auto m = payload();
      m.insert(m.begin(), make_header(h->type, h->channel, ours, h->aux, h->flags));
      upstream_->send_upstream(std::move(m));
    } else if (h->flags & flag_expects_reply) {
      // The caller waits for an answer: tell it the service is gone rather than let it hang.
      (void)try_send_to_child(peer, make_message(kind::service_gone, {.channel = h->channel, .request = h->request, .flags = flag_reply}));
    } else {
      logf(log_level::debug, "message for service ", h->channel, " that is gone, from ", peer, "; ignored");
    }
    return;
  }
  if (upstream_) {  // nested: what goes on up to the top (runtime/nested/nested_relay.hpp)
    switch (relay_of(h->type)) {
      case relay::here: break;
      case relay::as_is: return upstream_->send_upstream(passed_up(h->type, h->aux, payload()));
      case relay::channel_put: return upstream_->put(h->channel, payload());
      case relay::channel_get: return forward_get(peer, h->channel, h->request);
      case relay::cancel_get:
        if (auto it = forwarded_.find({peer, h->request}); it != forwarded_.end())
          upstream_->cancel_get(it->second.first, it->second.second);
        return;  // the answer to the forwarded get (cancelled, or the item) goes down when it comes
      case relay::maker_gone: return upstream_->maker_gone(h->aux);
    }
  }
  switch (h->type) {
    case kind::hello:
    case kind::done: {
      auto it = children_.find(peer);
      auto child = it == children_.end() ? nullptr : it->second.lock();
      if (!child) {
        // A child that has been let go (terminated pool worker) may still have been talking.
        logf(log_level::debug, "message from child ", peer, " that is no longer tracked; ignored");
        return;
      }
      std::string text = m.size() > first + 1 ? m[first + 1].to_string() : std::string();
      if (h->type == kind::hello)
        child->on_hello(text);
      else
        child->on_done(h->aux != 0, text);
      return;
    }
    case kind::put:
      if (maker_has_gone(h->channel)) {
        logf(log_level::warn, "a message from ", peer, " to a queue or pipe whose maker has ended was dropped");
        return;
      }
      broker_.put(h->channel, payload(), true);
      return;
    case kind::get:
      if (h->channel == prefix_channel) {
        // A nested master asks a channel prefix for its new child: unique in the job, as the
        // prefixes of this master's own children are (one counter for both). Its channels end
        // with it (kind::maker_gone), or with the child of this master it came through.
        auto prefix = new_peer();
        handed_out_[prefix] = peer;
        (void)try_send_to_child(peer, make_message(kind::item, {.channel = h->channel, .request = h->request}, as_pod(prefix)));
        return;
      }
      if (maker_has_gone(h->channel)) return fail_read(channel_reader{peer, h->request}, h->channel);
      broker_.get(h->channel, channel_reader{peer, h->request});
      return;
    case kind::record: {
      auto p = payload();
      if (!record_ || p.size() != 4 || p[1].size() != 8 || p[2].size() != 8) return;
      std::uint64_t c = 0, d = 0;
      std::memcpy(&c, p[1].data(), 8);
      std::memcpy(&d, p[2].data(), 8);
      record_(static_cast<record_kind>(h->aux), p[0].to_string_view(), c, d, p[3].to_string_view());
      return;
    }
    case kind::pool_view: {
      auto p = payload();
      if (!take_pool_views_ || p.size() != 3 || p[0].size() != 8) return;
      std::uint64_t id = 0;
      std::memcpy(&id, p[0].data(), 8);
      take_pool_views_(id, p[1].to_string_view(), p[2].to_string_view(), h->aux != 0);
      return;
    }
    case kind::record_batch: {
      auto p = payload();
      if (!take_records_ || p.size() != 4 || p[0].size() != 8 || p[1].size() != 8) return;
      std::uint64_t sender = 0, now = 0;
      std::memcpy(&sender, p[0].data(), 8);
      std::memcpy(&now, p[1].data(), 8);
      take_records_(sender, now, p[2].to_string_view(), p[3].to_string_view());
      return;
    }
    case kind::maker_gone:
      maker_gone(h->aux);
      return;
    case kind::cancel_get:
      if (broker_.cancel(h->channel, peer, h->request)) {
        (void)try_send_to_child(peer, make_message(kind::cancelled, {.channel = h->channel, .request = h->request}));
      }
      return;
    case kind::probe: return;  // a pulse: a child across a network is alive (runtime/links/link_pulse)
    default: logf(log_level::error, "unexpected message kind ", int(h->type), " from ", peer, "; ignored");
  }
}

bool master_side::deliver(const channel_reader& r, std::uint64_t channel, multipart& payload, bool may_run_inline) {
  if (r.peer.empty()) {
    gets_.complete(r.request, {}, std::move(payload), may_run_inline);
    return true;
  }
  multipart m;
  m.reserve(payload.size() + 1);
  m.push_back(make_header(kind::item, channel, r.request));
  for (auto& f : payload) m.push_back(std::move(f));
  if (auto ec = try_send_to_child(r.peer, std::move(m))) {
    // The reader is gone: the item stays in the queue for the next reader.
    logf(log_level::warn, "reader ", r.peer, " is gone (", ec.message(), "); message kept for the next reader");
    payload.clear();
    for (std::size_t i = 1; i < m.size(); ++i) payload.push_back(std::move(m[i]));
    return false;
  }
  return true;
}

void master_side::forward_channels_to(worker_side* upstream) { upstream_ = upstream; }

bool master_side::pass_reply_down(const header& h, multipart& payload) {
  auto it = passed_calls_.find(h.request);
  if (it == passed_calls_.end()) return false;
  auto [peer, theirs] = it->second;
  passed_calls_.erase(it);
  multipart m;
  m.reserve(payload.size() + 1);
  m.push_back(make_header(h.type, h.channel, theirs, h.aux, h.flags));
  for (auto& f : payload) m.push_back(std::move(f));
  (void)try_send_to_child(peer, std::move(m));  // a child that is gone hears nothing
  return true;
}

std::uint32_t master_side::new_peer() {
  static std::atomic<std::uint32_t> next{1};
  return next++;
}

void master_side::forward_get(const std::string& peer, std::uint64_t channel, std::uint64_t request) {
  auto ours = gets_.add(channel, [weak = weak_from_this(), peer, channel, request](std::error_code ec, multipart payload,
                                                                                  bool) {
    auto self = weak.lock();
    if (!self) return;
    self->forwarded_.erase({peer, request});
    if (ec == make_error_code(errc::timeout)) {  // withdrawn upstream, as the child asked
      (void)self->try_send_to_child(peer, make_message(kind::cancelled, {.channel = channel, .request = request}));
      return;
    }
    if (ec) {
      std::uint32_t named = ec.category() == fiber_category() ? static_cast<std::uint32_t>(ec.value()) : 0;
      (void)self->try_send_to_child(peer, make_message(kind::failure, {.channel = channel, .request = request, .aux = named},
                                                       "the read failed above: " + ec.message()));
      return;
    }
    multipart m;
    m.reserve(payload.size() + 1);
    m.push_back(make_header(kind::item, channel, request));
    for (auto& f : payload) m.push_back(std::move(f));
    if (self->try_send_to_child(peer, std::move(m))) {
      // The reader died meanwhile: the message goes back to its queue rather than being lost.
      multipart back;
      for (std::size_t i = 1; i < m.size(); ++i) back.push_back(std::move(m[i]));
      if (self->upstream_ && channel != prefix_channel) self->upstream_->put(channel, std::move(back));
    }
  });
  forwarded_[{peer, request}] = {channel, ours};
  upstream_->get(channel, ours);
}

void master_side::put(std::uint64_t channel, multipart&& payload) {
  if (maker_has_gone(channel)) {
    logf(log_level::warn, "a message to a queue or pipe whose maker has ended was dropped");
    return;
  }
  broker_.put(channel, std::move(payload), false);
}

void master_side::get(std::uint64_t channel, std::uint64_t request) {
  if (maker_has_gone(channel)) return fail_read(channel_reader{{}, request}, channel);
  broker_.get(channel, channel_reader{{}, request});
}

void master_side::maker_gone(std::uint32_t prefix) {
  if (prefix == 0) return;  // the top master's own: they end with the job
  gone_makers_.insert(prefix);
  handed_out_.erase(prefix);
  std::size_t dropped = 0;
  for (auto& [channel, reader] : broker_.end_prefix(prefix, dropped)) fail_read(reader, channel);
  if (dropped)
    logf(log_level::warn, dropped, " message(s) nobody read were dropped with the queues and pipes of a process that ended");
}

void master_side::fail_read(const channel_reader& reader, std::uint64_t channel) {
  if (reader.peer.empty()) {
    gets_.complete(reader.request, make_error_code(errc::maker_gone), {}, false);
    return;
  }
  (void)try_send_to_child(reader.peer, make_message(kind::failure,
                                                    {.channel = channel, .request = reader.request,
                                                     .aux = static_cast<std::uint32_t>(errc::maker_gone)},
                                                    make_error_code(errc::maker_gone).message()));
}

void master_side::cancel_get(std::uint64_t channel, std::uint64_t request) {
  if (broker_.cancel(channel, {}, request)) gets_.complete(request, make_error_code(errc::timeout), {}, true);
}

void master_side::attach_child(const std::string& routing_id, std::weak_ptr<child_endpoint> child) {
  children_[routing_id] = std::move(child);
}

void master_side::detach_child(const std::string& routing_id) {
  children_.erase(routing_id);
  // Its queues and pipes end with it, and in the top master those of its subtree.
  if (upstream_) {
    std::erase_if(passed_calls_, [&](const auto& e) { return e.second.first == routing_id; });
    if (auto p = prefixes_.find(routing_id); p != prefixes_.end()) {
      upstream_->maker_gone(p->second);
      prefixes_.erase(p);
    }
  } else if (!closed_) {
    std::vector<std::uint32_t> ended{static_cast<std::uint32_t>(std::strtoul(routing_id.c_str(), nullptr, 10))};
    for (auto& [prefix, through] : handed_out_)
      if (through == routing_id) ended.push_back(prefix);
    for (auto prefix : ended) maker_gone(prefix);
  }
  services_.peer_gone(routing_id);  // e.g. the tree's spawn service ends what it started through the child
  broker_.forget_peer(routing_id);  // readers that died while waiting must not receive messages
  // ... nor the reads a nested master asked upstream for them (an item already on its way comes
  // back here, finds the child gone, and goes back to its queue).
  if (upstream_)
    for (auto it = forwarded_.lower_bound({routing_id, 0}); it != forwarded_.end() && it->first.first == routing_id;) {
      auto [channel, ours] = it->second;
      ++it;  // the cancel's answer may erase the entry
      upstream_->cancel_get(channel, ours);
    }
}

void master_side::send_to_child(const std::string& routing_id, multipart&& parts) {
  if (auto ec = try_send_to_child(routing_id, std::move(parts)))
    logf(log_level::warn, "cannot reach child ", routing_id, ": ", ec.message());
}

std::error_code master_side::try_send_to_child(const std::string& routing_id, multipart&& parts) {
  if (direct_) return direct_->send(routing_id, std::move(parts));
  if (!router_) return make_error_code(errc::closed);
  parts.insert(parts.begin(), zmq::message_t(routing_id.data(), routing_id.size()));  // the router's envelope
  auto ec = router_->send(std::move(parts));
  if (ec) parts.erase(parts.begin());  // not taken: as it was
  return ec;
}

std::vector<int> master_side::live_pids() const {
  std::vector<int> pids;
  for (auto& w : live_jobs_)
    if (auto j = w.lock()) pids.push_back(j->pid());
  return pids;
}

void master_side::shutdown() noexcept {
  if (closed_) return;
  closed_ = true;
  auto children = std::move(children_);
  children_.clear();
  for (auto& [id, weak] : children)
    if (auto child = weak.lock()) child->on_master_shutdown();
  for (auto& w : live_jobs_) {
    auto j = w.lock();
    if (!j) continue;
    logf(log_level::warn, "child pid ", j->pid(), " still running at shutdown: killed");
    j->kill_and_reap();
  }
  live_jobs_.clear();
  children_.clear();
  forks_.reset();  // its children were killed with the master's other children
  if (hubs_) hubs_->shutdown();
  hubs_.reset();
  backend_.reset();  // ends helpers such as the fork server
  gets_.fail_all(make_error_code(errc::closed));
  broker_.clear();
  if (router_) router_->close();
  if (direct_) direct_->close();
  if (zap_) zap_->close();
}

}  // namespace fiber::detail
