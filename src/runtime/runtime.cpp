#include "runtime/runtime.hpp"

#include "runtime/init.hpp"
#include "transport/master_watch.hpp"
#include "core/message_limit.hpp"
#include "core/remote_failure.hpp"

#include <asio/post.hpp>
#include <unistd.h>

#include <cstring>
#include <random>

#include "fiber/error.hpp"
#include "core/log.hpp"

namespace fiber::detail {

job_keys job_keys::generate() {
  job_keys k;
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0)
    throw error(errc::protocol_error, "libzmq was built without CURVE support; install a libzmq with libsodium");
  k.server_public = pub;
  k.server_secret = sec;
  zmq_curve_keypair(pub, sec);
  k.client_public = pub;
  k.client_secret = sec;
  zmq_curve_keypair(pub, sec);  // 40 random Z85 characters
  k.password = sec;
  return k;
}

std::string job_keys::for_worker(bool use_plain) const {
  if (use_plain) return "plain," + password;
  return "curve," + server_public + "," + client_public + "," + client_secret;
}

job_keys job_keys::from_worker_text(std::string_view text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    auto comma = text.find(',', start);
    parts.emplace_back(text.substr(start, comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  job_keys k;
  if (parts.size() == 2 && parts[0] == "plain" && parts[1].size() == 40) {
    k.plain = true;
    k.password = parts[1];
    return k;
  }
  if (parts.size() == 4 && parts[0] == "curve" && parts[1].size() == 40 && parts[2].size() == 40 && parts[3].size() == 40) {
    k.server_public = parts[1];
    k.client_public = parts[2];
    k.client_secret = parts[3];
    return k;
  }
  throw error(errc::protocol_error, "malformed worker credentials; only fiber starts workers");
}

namespace {
std::string random_job_id() {
  std::random_device rd;
  std::uint64_t v = (std::uint64_t{rd()} << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return std::string(buf, 12);
}
}  // namespace

// ---------------------------------------------------------------------------------------------

runtime::runtime(asio::io_context* external, fiber::config cfg)
    : role_(role::master), cfg_(std::move(cfg)), job_id_(random_job_id()), keys_(job_keys::generate()) {
  if (external) {
    io_ = external;
  } else {
    owned_io_ = std::make_unique<asio::io_context>(1);
    io_ = owned_io_.get();
    self_driven_ = true;
    work_.emplace(io_->get_executor());
    standby_ = std::thread([this] { standby_loop(); });
  }
}

runtime::runtime(fiber::config cfg, std::string job_id, job_keys keys, std::string master_endpoint, std::string token)
    : role_(role::worker), cfg_(std::move(cfg)), job_id_(std::move(job_id)), keys_(std::move(keys)) {
  owned_io_ = std::make_unique<asio::io_context>(1);
  io_ = owned_io_.get();
  self_driven_ = true;
  work_.emplace(io_->get_executor());
  channel_prefix_ = std::stoull(token) << 32;
  zmq::socket_t s(zctx_, zmq::socket_type::dealer);
  configure_socket(s);
  // The only peer is the master, proven by the job's keys; its config (and so its
  // max_message_bytes, which senders check) arrives only in the handshake, after this socket
  // exists: a default limit here silently dropped larger messages a raised limit allowed.
  s.set(zmq::sockopt::maxmsgsize, std::int64_t{-1});
  s.set(zmq::sockopt::routing_id, token);
  if (keys_.plain) {
    s.set(zmq::sockopt::plain_username, "fiber");
    s.set(zmq::sockopt::plain_password, keys_.password);
  } else {
    s.set(zmq::sockopt::curve_serverkey, keys_.server_public);
    s.set(zmq::sockopt::curve_publickey, keys_.client_public);
    s.set(zmq::sockopt::curve_secretkey, keys_.client_secret);
  }
  s.set(zmq::sockopt::linger, 10000);  // what the worker sent reaches the master before it exits
  s.connect(master_endpoint);
  upstream_ = std::make_shared<zmq_channel>(*io_, std::move(s));
}

runtime::~runtime() { stop(); }

void runtime::stop() noexcept {
  if (standby_.joinable()) {
    if (in_loop_thread()) {
      shutdown();
    } else {
      try {
        run_sync([this] { shutdown(); });
      } catch (...) {
        shutdown();  // the loop is gone: nothing else runs it
      }
    }
    {
      std::lock_guard lock(wait_mutex_);
      stopping_ = true;
    }
    standby_cv_.notify_all();
    work_.reset();
    io_->stop();  // wakes a standby blocked in run_one
    if (std::this_thread::get_id() == standby_.get_id())
      standby_.detach();  // last reference dropped by a handler on the standby itself
    else
      standby_.join();
  } else {
    shutdown();
    work_.reset();
  }
  // Waits, within each socket's linger, until what was sent has left this process.
  zctx_.close();
}

bool runtime::in_loop_thread() const noexcept { return io_->get_executor().running_in_this_thread(); }

// How long the standby thread leaves the loop to callers after the last one let go of it: a
// caller that blocks again within this time drives the loop without waking another thread.
static constexpr auto standby_linger = std::chrono::milliseconds(1);
// While callers drive, the standby looks again this often; callers never wake it (that would
// cost a cross-core wake-up on every blocking call).
static constexpr auto standby_recheck = std::chrono::milliseconds(2);

bool runtime::run_one_logged() noexcept {
  try {
    return io_->run_one() != 0;
  } catch (const std::exception& e) {
    // A handler let an exception escape (a detached coroutine that threw). It is nobody's
    // operation in particular, and the loop must go on serving the others.
    logf(log_level::error, "exception escaped a handler on fiber's event loop: ", e.what());
  } catch (...) {
    logf(log_level::error, "exception escaped a handler on fiber's event loop");
  }
  return true;
}

void runtime::standby_loop() {
  std::unique_lock lock(wait_mutex_);
  while (!stopping_) {
    if (driving_ || want_to_drive_ > 0) {
      standby_cv_.wait_for(lock, standby_recheck);
      continue;
    }
    auto idle = std::chrono::steady_clock::now() - last_release_;
    if (idle < standby_linger) {
      standby_cv_.wait_for(lock, standby_linger - idle);
      continue;
    }
    driving_ = standby_driving_ = true;
    lock.unlock();
    run_one_logged();
    lock.lock();
    driving_ = standby_driving_ = false;
    kicked_ = false;
    if (want_to_drive_ > 0) wait_cv_.notify_all();
  }
}

void runtime::notify_done(std::atomic<bool>& done) noexcept {
  {
    std::lock_guard lock(wait_mutex_);
    done.store(true, std::memory_order_release);
  }
  wait_cv_.notify_all();
}

void runtime::drive(unique_function<void()> start, const std::atomic<bool>& done) {
  auto is_done = [&] { return done.load(std::memory_order_acquire); };
  if (!self_driven_) {
    if (start) run_sync(std::move(start));
    std::unique_lock lock(wait_mutex_);
    wait_cv_.wait(lock, is_done);
    return;
  }
  std::unique_lock lock(wait_mutex_);
  ++want_to_drive_;
  for (;;) {
    if (!start && is_done()) break;
    if (!driving_) {
      // Take the loop and run it until our own operation completes; others wait for us.
      driving_ = true;
      --want_to_drive_;
      lock.unlock();
      std::exception_ptr failure;
      bool stopped = false;
      try {
        if (auto f = std::move(start)) {
          start = nullptr;
          f();  // the caller's own operation: its exceptions are the caller's
        }
      } catch (...) {
        failure = std::current_exception();
      }
      while (!failure && !is_done() && !stopped) stopped = !run_one_logged();
      lock.lock();
      driving_ = false;
      last_release_ = std::chrono::steady_clock::now();
      if (want_to_drive_ > 0) wait_cv_.notify_all();  // another caller takes the loop
      if (failure) std::rethrow_exception(failure);
      if (is_done()) return;
      if (stopped) throw error(errc::closed, "fiber's event loop has stopped");
      ++want_to_drive_;
      continue;
    }
    if (standby_driving_ && !kicked_) {
      kicked_ = true;
      asio::post(*io_, [] {});  // makes the standby's run_one return and hand over
    }
    wait_cv_.wait(lock);
  }
  --want_to_drive_;
}

void runtime::run_sync(unique_function<void()> f) {
  if (in_loop_thread()) {
    f();
    return;
  }
  std::atomic<bool> done{false};
  std::exception_ptr failure;
  asio::post(*io_, [&] {
    try {
      f();
    } catch (...) {
      failure = std::current_exception();
    }
    notify_done(done);
  });
  wait_until(done);
  if (failure) std::rethrow_exception(failure);
}

void runtime::run_soon(unique_function<void()> f) {
  if (shut_down_) return;
  if (in_loop_thread() || owned_io_) {
    run_sync(std::move(f));
    return;
  }
  asio::post(*io_, [f = std::move(f), weak = weak_from_this()]() mutable {
    if (auto self = weak.lock(); self && !self->shut_down_) f();
  });
}

void runtime::configure_socket(zmq::socket_t& s) const {
  s.set(zmq::sockopt::sndhwm, 0);  // queues are unbounded, like multiprocessing's
  s.set(zmq::sockopt::rcvhwm, 0);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::heartbeat_ivl, cfg_.heartbeat_interval_ms);
  s.set(zmq::sockopt::heartbeat_timeout, cfg_.heartbeat_timeout_ms);
  s.set(zmq::sockopt::heartbeat_ttl, std::min(cfg_.heartbeat_timeout_ms, 6553599));
  s.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(cfg_.max_message_bytes + 4096));
}

std::uint64_t runtime::new_channel_id() noexcept { return channel_prefix_ | next_channel_.fetch_add(1); }

// ---- channels --------------------------------------------------------------------------------

void runtime::put(std::uint64_t channel, writer& w) {
  check_message_size("a queue or pipe message would", w.total_size(), cfg_.max_message_bytes, "send smaller pieces");
  if (shut_down_) throw error(errc::closed, "the fiber context has shut down");
  auto frames = to_frames(w);
  if (role_ == role::master) {
    broker_put(channel, std::move(frames), false);
    return;
  }
  multipart m;
  m.reserve(frames.size() + 1);
  m.push_back(make_header(kind::put, channel));
  for (auto& f : frames) m.push_back(std::move(f));
  send_upstream(std::move(m));
}

void runtime::get(std::uint64_t channel, std::optional<std::chrono::milliseconds> timeout, get_handler h) {
  if (shut_down_) {
    h(make_error_code(errc::closed), {}, false);
    return;
  }
  auto request = next_request_++;
  auto& g = gets_[request];
  g.channel = channel;
  g.handler = std::move(h);
  if (timeout) {
    g.timer = std::make_unique<asio::steady_timer>(*io_, *timeout);
    g.timer->async_wait([weak = weak_from_this(), request](std::error_code ec) {
      auto self = weak.lock();
      if (ec || !self) return;
      auto it = self->gets_.find(request);
      if (it == self->gets_.end()) return;
      if (self->role_ == role::master) {
        if (self->broker_cancel(it->second.channel, {}, request))
          self->complete_get(request, make_error_code(errc::timeout), {}, true);
      } else if (!it->second.cancelling) {
        // The owner answers with `cancelled`, or with the item if it was already on its way.
        it->second.cancelling = true;
        multipart m;
        m.push_back(make_header(kind::cancel_get, it->second.channel, request));
        self->send_upstream(std::move(m));
      }
    });
  }
  if (role_ == role::master) {
    broker_get(channel, waiter{{}, request});
  } else {
    multipart m;
    m.push_back(make_header(kind::get, channel, request));
    send_upstream(std::move(m));
  }
}

void runtime::release(std::uint64_t channel) noexcept {
  if (role_ != role::master) return;
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  if (!it->second.items.empty())
    logf(log_level::warn, "a queue was destroyed with ", it->second.items.size(), " unread message(s)");
  if (it->second.waiters.empty())
    channels_.erase(it);
  else
    it->second.released = true;
}

void runtime::complete_get(std::uint64_t request, std::error_code ec, multipart&& payload, bool may_run_inline) {
  auto it = gets_.find(request);
  if (it == gets_.end()) return;
  auto g = std::move(it->second);
  gets_.erase(it);
  if (g.timer) g.timer->cancel();
  g.handler(ec, std::move(payload), may_run_inline);
}

bool runtime::deliver(const waiter& w, std::uint64_t channel, multipart& payload, bool may_run_inline) {
  if (w.peer.empty()) {
    complete_get(w.request, {}, std::move(payload), may_run_inline);
    return true;
  }
  multipart m;
  m.reserve(payload.size() + 2);
  m.emplace_back(w.peer.data(), w.peer.size());
  m.push_back(make_header(kind::item, channel, w.request));
  for (auto& f : payload) m.push_back(std::move(f));
  if (auto ec = router_->send(std::move(m))) {
    // The reader is gone: the item stays in the queue for the next reader.
    logf(log_level::warn, "reader ", w.peer, " is gone (", ec.message(), "); message kept for the next reader");
    payload.clear();
    for (std::size_t i = 2; i < m.size(); ++i) payload.push_back(std::move(m[i]));
    return false;
  }
  return true;
}

void runtime::broker_put(std::uint64_t channel, multipart&& payload, bool from_network) {
  auto& ch = channels_[channel];
  while (!ch.waiters.empty()) {
    auto w = std::move(ch.waiters.front());
    ch.waiters.pop_front();
    if (deliver(w, channel, payload, from_network)) return;  // else try the next waiting reader
  }
  ch.items.push_back(std::move(payload));
}

void runtime::broker_get(std::uint64_t channel, waiter w) {
  auto& ch = channels_[channel];
  while (!ch.items.empty()) {
    auto payload = std::move(ch.items.front());
    ch.items.pop_front();
    if (deliver(w, channel, payload, false)) return;  // inside get's initiation
    ch.items.push_front(std::move(payload));
    return;  // the reader is gone
  }
  ch.waiters.push_back(std::move(w));
}

bool runtime::broker_cancel(std::uint64_t channel, const std::string& peer, std::uint64_t request) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return false;
  auto& ws = it->second.waiters;
  for (auto w = ws.begin(); w != ws.end(); ++w)
    if (w->peer == peer && w->request == request) {
      ws.erase(w);
      return true;
    }
  return false;
}

// ---- master ----------------------------------------------------------------------------------

backend& runtime::the_backend() {
  if (!backend_) backend_ = make_backend(*io_, cfg_, job_id_);
  return *backend_;
}

const std::string& runtime::listen() {
  if (router_) return endpoint_;
  start_zap();
  zmq::socket_t s(zctx_, zmq::socket_type::router);
  configure_socket(s);
  s.set(zmq::sockopt::router_mandatory, 1);
  auto endpoint = the_backend().listen_endpoint(job_id_);
  plain_auth_ = endpoint.starts_with("ipc://") && cfg_.encryption == "auto";
  if (plain_auth_) {
    s.set(zmq::sockopt::plain_server, 1);
  } else {
    s.set(zmq::sockopt::curve_server, 1);
    s.set(zmq::sockopt::curve_secretkey, keys_.server_secret);
  }
  s.set(zmq::sockopt::zap_domain, "fiber");
  try {
    s.bind(endpoint);
  } catch (const zmq::error_t& e) {
    throw error(errc::spawn_failed, "cannot listen on " + endpoint + ": " + e.what());
  }
  endpoint_ = the_backend().advertised(s.get(zmq::sockopt::last_endpoint));
  router_ = std::make_shared<zmq_channel>(*io_, std::move(s));
  logf(log_level::debug, "listening on ", endpoint_);
  master_loop_step();
  return endpoint_;
}

std::vector<std::string> runtime::endpoints() const {
  if (endpoint_.empty()) return {};
  return {endpoint_};
}

void runtime::start_zap() {
  // ZeroMQ asks this socket about every peer: only this job's client key (CURVE) or password
  // (PLAIN, local unix sockets only) may in.
  zmq::socket_t s(zctx_, zmq::socket_type::rep);
  s.set(zmq::sockopt::linger, 0);
  s.bind("inproc://zeromq.zap.01");
  zap_ = std::make_shared<zmq_channel>(*io_, std::move(s));
  struct loop {
    static void step(std::weak_ptr<runtime> weak) {
      auto self = weak.lock();
      if (!self || !self->zap_) return;
      self->zap_->async_receive([weak](std::error_code ec, multipart req) {
        auto self = weak.lock();
        if (ec || !self || !self->zap_) return;
        // version, request id, domain, address, identity, mechanism, credentials...
        bool ok = false;
        auto mechanism = req.size() >= 7 ? req[5].to_string_view() : std::string_view();
        if (mechanism == "CURVE" && !self->plain_auth_ && req[6].size() == 32) {
          std::uint8_t expected[32];
          zmq_z85_decode(expected, self->keys_.client_public.c_str());
          ok = std::memcmp(expected, req[6].data(), 32) == 0;
        } else if (mechanism == "PLAIN" && self->plain_auth_ && req.size() >= 8) {
          ok = req[7].to_string_view() == self->keys_.password;
        }
        if (!ok) logf(log_level::warn, "refused a peer without this job's keys");
        multipart reply;
        reply.emplace_back(std::string_view("1.0"));
        reply.push_back(req.size() > 1 ? std::move(req[1]) : zmq::message_t());
        reply.emplace_back(std::string_view(ok ? "200" : "400"));
        reply.emplace_back(std::string_view(ok ? "OK" : "unknown key"));
        reply.emplace_back();
        reply.emplace_back();
        self->zap_->send(std::move(reply));
        step(weak);
      });
    }
  };
  loop::step(weak_from_this());
}

void runtime::master_loop_step() {
  router_->async_receive([weak = weak_from_this()](std::error_code ec, multipart m) {
    auto self = weak.lock();
    if (ec || !self || self->shut_down_) return;
    self->handle_master_message(std::move(m));
    self->master_loop_step();
  });
}

void runtime::handle_master_message(multipart&& m) {
  std::string peer = m.empty() ? std::string() : m[0].to_string();
  auto h = m.size() >= 2 ? parse_header(m[1]) : std::nullopt;
  if (!h) {
    logf(log_level::error, "malformed message from ", peer, " (", m.size(),
         " frames): not a fiber header of protocol version ", protocol_version, "; ignored and reported to the sender");
    multipart reply;
    reply.emplace_back(peer.data(), peer.size());
    reply.push_back(make_header(kind::failure));
    reply.emplace_back(std::string_view("malformed message: not a fiber header of this protocol version"));
    (void)router_->send(std::move(reply));
    return;
  }
  auto payload = [&] {
    multipart p;
    for (std::size_t i = 2; i < m.size(); ++i) p.push_back(std::move(m[i]));
    return p;
  };
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
      std::string text = m.size() > 2 ? m[2].to_string() : std::string();
      if (h->type == kind::hello)
        child->on_hello(text);
      else
        child->on_done(h->aux != 0, text);
      return;
    }
    case kind::pool_ready:
    case kind::pool_result:
    case kind::mgr_reply: {
      auto it = services_.find(h->channel);
      auto svc = it == services_.end() ? nullptr : it->second.lock();
      if (svc)
        svc->on_message(peer, *h, payload());
      else
        logf(log_level::debug, "message for service ", h->channel, " that is gone, from ", peer, "; ignored");
      return;
    }
    case kind::mgr_call: {
      auto it = services_.find(h->channel);
      auto svc = it == services_.end() ? nullptr : it->second.lock();
      if (svc) {
        svc->on_message(peer, *h, payload());
        return;
      }
      // The caller waits for an answer: tell it the manager is gone rather than let it hang.
      auto text = remote_failure::fiber_error(errc::server_lost, "manager " + std::to_string(h->channel) +
                                                                      " has been shut down: its objects are gone")
                      .encode();
      multipart reply;
      reply.emplace_back(peer.data(), peer.size());
      reply.push_back(make_header(kind::mgr_reply, h->channel, h->request, 2));
      reply.emplace_back(text.data(), text.size());
      (void)router_->send(std::move(reply));
      return;
    }
    case kind::put: broker_put(h->channel, payload(), true); return;
    case kind::get: broker_get(h->channel, waiter{peer, h->request}); return;
    case kind::cancel_get:
      if (broker_cancel(h->channel, peer, h->request)) {
        multipart reply;
        reply.emplace_back(peer.data(), peer.size());
        reply.push_back(make_header(kind::cancelled, h->channel, h->request));
        (void)router_->send(std::move(reply));
      }
      return;
    default: logf(log_level::error, "unexpected message kind ", int(h->type), " from ", peer, "; ignored");
  }
}

void runtime::attach_child(const std::string& routing_id, std::weak_ptr<child_endpoint> child) {
  children_[routing_id] = std::move(child);
}

void runtime::detach_child(const std::string& routing_id) {
  children_.erase(routing_id);
  // Readers that died while waiting must not receive messages.
  for (auto& [id, ch] : channels_) std::erase_if(ch.waiters, [&](const waiter& w) { return w.peer == routing_id; });
}

void runtime::send_to_child(const std::string& routing_id, multipart&& parts) {
  if (auto ec = try_send_to_child(routing_id, std::move(parts)))
    logf(log_level::warn, "cannot reach child ", routing_id, ": ", ec.message());
}

std::error_code runtime::try_send_to_child(const std::string& routing_id, multipart&& parts) {
  if (!router_) return make_error_code(errc::closed);
  multipart m;
  m.reserve(parts.size() + 1);
  m.emplace_back(routing_id.data(), routing_id.size());
  for (auto& p : parts) m.push_back(std::move(p));
  return router_->send(std::move(m));
}

std::vector<int> runtime::live_pids() const {
  std::vector<int> pids;
  for (auto* j : live_jobs_) pids.push_back(j->pid());
  return pids;
}

// ---- worker ----------------------------------------------------------------------------------

void runtime::send_upstream(multipart&& parts) {
  if (auto ec = upstream_->send(std::move(parts)))
    logf(log_level::error, "cannot send to the master: ", ec.message());
}

void runtime::on_first_message(unique_function<void(std::error_code, multipart)> h) {
  first_message_ = std::move(h);
  worker_loop_step();  // not in the constructor: weak_from_this() is empty there
}

void runtime::push_service_message(multipart m) {
  service_inbox_.push_back(std::move(m));
  notify_done(service_arrived_);
}

multipart runtime::next_service_message() {
  if (service_inbox_.empty()) {
    service_arrived_ = false;
    // Set by the loop (on this thread, inside drive) when a service message arrives.
    drive([this] { if (!service_inbox_.empty()) notify_done(service_arrived_); }, service_arrived_);
  }
  auto m = std::move(service_inbox_.front());
  service_inbox_.pop_front();
  return m;
}

void runtime::watch_master() {
  master_watch_ = std::make_unique<master_watch>(zctx_, upstream_->socket(),
                                                 std::chrono::milliseconds(cfg_.heartbeat_timeout_ms),
                                                 [] { exit_worker(exit_master_lost); });
}

void runtime::worker_loop_step() {
  upstream_->async_receive([weak = weak_from_this()](std::error_code ec, multipart m) {
    auto self = weak.lock();
    if (ec || !self || self->shut_down_) return;
    self->handle_worker_message(std::move(m));
    self->worker_loop_step();
  });
}

void runtime::handle_worker_message(multipart&& m) {
  auto h = m.empty() ? std::nullopt : parse_header(m[0]);
  if (!h) {
    logf(log_level::error, "malformed message from the master (", m.size(), " frames); ignored");
    return;
  }
  multipart payload;
  for (std::size_t i = 1; i < m.size(); ++i) payload.push_back(std::move(m[i]));
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
      if (!gets_.count(h->request)) {
        // Not asked for (any more): give it back rather than lose it.
        logf(log_level::warn, "unrequested message on channel ", h->channel, " returned to its queue");
        multipart back;
        back.push_back(make_header(kind::put, h->channel));
        for (auto& f : payload) back.push_back(std::move(f));
        send_upstream(std::move(back));
        return;
      }
      complete_get(h->request, {}, std::move(payload), true);
      return;
    case kind::cancelled: complete_get(h->request, make_error_code(errc::timeout), {}, true); return;
    case kind::mgr_reply: {
      auto it = services_.find(h->channel);
      auto svc = it == services_.end() ? nullptr : it->second.lock();
      if (svc)
        svc->on_message({}, *h, std::move(payload));
      else
        logf(log_level::debug, "reply from manager ", h->channel, " nobody waits for; ignored");
      return;
    }
    case kind::pool_task:
    case kind::pool_stop:
    case kind::mgr_call:
    case kind::mgr_stop:
      payload.insert(payload.begin(), std::move(m[0]));
      service_inbox_.push_back(std::move(payload));
      notify_done(service_arrived_);
      return;
    case kind::probe: return;
    case kind::failure: {
      auto text = payload.empty() ? std::string("(no detail)") : payload[0].to_string();
      logf(log_level::error, "the master reported: ", text);
      if (h->request) complete_get(h->request, make_error_code(errc::protocol_error), {}, true);
      return;
    }
    default: logf(log_level::error, "unexpected message kind ", int(h->type), " from the master; ignored");
  }
}

// ---- shutdown --------------------------------------------------------------------------------

void runtime::shutdown() noexcept {
  if (shut_down_) return;
  shut_down_ = true;
  for (auto& [id, weak] : services_)
    if (auto s = weak.lock()) s->on_shutdown();
  auto children = std::move(children_);
  children_.clear();
  for (auto& [id, weak] : children)
    if (auto child = weak.lock()) child->on_master_shutdown();
  for (auto* j : live_jobs_) {
    logf(log_level::warn, "child pid ", j->pid(), " still running at shutdown: killed");
    j->kill_and_reap();
  }
  live_jobs_.clear();
  children_.clear();
  backend_.reset();  // ends helpers such as the fork server
  auto gets = std::move(gets_);
  gets_.clear();
  for (auto& [req, g] : gets) {
    if (g.timer) g.timer->cancel();
    g.handler(make_error_code(errc::closed), {}, false);
  }
  channels_.clear();
  if (router_) router_->close();
  if (zap_) zap_->close();
  master_watch_.reset();
  if (upstream_) upstream_->close();
}

}  // namespace fiber::detail
