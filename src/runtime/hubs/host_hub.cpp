#include "runtime/hubs/host_hub.hpp"

#include "core/log.hpp"
#include "runtime/protocol.hpp"

namespace fiber::detail {

host_hub::host_hub(asio::io_context& io, std::shared_ptr<stream_link> upstream, std::string password,
                   std::size_t max_message_bytes, std::chrono::milliseconds greeting_timeout,
                   unique_function<std::unique_ptr<backend>()> children)
    : io_(io), upstream_(std::move(upstream)), make_spawner_backend_(std::move(children)), pulse_timer_(io) {
  // What the children send in one turn goes to the master in one write.
  upstream_->set_coalescing(true);
  // Any child that knows the password is linked here; whether it is one the master waits for,
  // the master says (it refuses the others).
  children_ = std::make_shared<direct_listener>(
      io, std::move(password), max_message_bytes, greeting_timeout, [](const std::string&) { return true; },
      [this](const std::string& id, multipart&& m) {
        // A child's pulse is for whoever closes its link when it stops: this hub. The master
        // hears the hub's, not a thousand children's.
        if (auto h = m.empty() ? std::nullopt : parse_header(m[0]); h && h->type == kind::probe) return;
        to_master(hub_wire::op::message, id, std::move(m));
      });
  children_->watch_children([this](const std::string& id) { to_master(hub_wire::op::joined, id, {}); },
                            [this](const std::string& id) { to_master(hub_wire::op::left, id, {}); });
}

void host_hub::start(const std::string& name, unique_function<void()> on_end, std::chrono::milliseconds interval,
                     std::chrono::milliseconds silence) {
  on_end_ = std::move(on_end);
  interval_ = interval;
  children_->listen(name);
  children_->close_silent(interval, silence);
  pulse();
  upstream_->start([weak = weak_from_this()](multipart m) {
        if (auto self = weak.lock()) self->from_master(std::move(m));
      },
      [weak = weak_from_this()](std::error_code ec) {
        auto self = weak.lock();
        if (!self || self->ended_) return;
        logf(log_level::info, "the master's link closed (", ec.message(), "); the hub closes its children's links");
        self->end();
      });
}

void host_hub::to_master(hub_wire::op o, const std::string& id, multipart&& parts) {
  if (ended_) return;
  parts.insert(parts.begin(), hub_wire::frame(o, id));
  if (auto ec = upstream_->send(std::move(parts))) {
    logf(log_level::error, "cannot send to the master: ", ec.message(), "; the hub ends");
    end();
  }
}

void host_hub::from_master(multipart&& m) {
  auto relay = m.empty() ? std::nullopt : hub_wire::parse(m[0]);
  if (!relay) return logf(log_level::error, "the master sent the hub a message without a relay frame; ignored");
  std::string id(relay->second);
  if (relay->first == hub_wire::op::refused) return children_->drop(id);
  if (relay->first == hub_wire::op::start) return start_child(id, std::move(m));
  if (relay->first == hub_wire::op::signal) {
    if (spawner_ && m.size() == 2) spawner_->signal(id, m[1].to_string_view());
    return;
  }
  if (relay->first != hub_wire::op::message) return;
  m.erase(m.begin());
  // A child gone since: its master hears that it left.
  (void)children_->send(id, std::move(m));
}

void host_hub::start_child(const std::string& start, multipart&& m) {
  auto refuse = [&](std::string why) {
    to_master(hub_wire::op::news, start, hub_news(spawn_wire::event::exited, {.code = 127, .detail = std::move(why)}));
  };
  if (m.size() != 2) return refuse("the master's start of a child on this hub had " + std::to_string(m.size()) + " parts, not 2");
  if (!spawner_) {
    if (!make_spawner_backend_) return refuse("this host hub starts no children (hub_workers=engine)");
    try {
      spawner_ = std::make_unique<hub_spawner>(io_, make_spawner_backend_(), [this](const std::string& s, multipart&& parts) {
        to_master(hub_wire::op::news, s, std::move(parts));
      });
    } catch (const std::exception& e) {
      return refuse(std::string("the host hub cannot start children: ") + e.what());
    }
  }
  spawner_->start(start, m[1].to_string_view());
}

// The master closes a hub's link silent for its heartbeat_timeout_ms; a hub whose children are
// all idle still speaks once an interval.
void host_hub::pulse() {
  pulse_timer_.expires_after(interval_);
  pulse_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->ended_) return;
    if (stream_link::clock::now() - self->upstream_->last_sent() >= self->interval_)
      self->to_master(hub_wire::op::pulse, {}, {});
    self->pulse();
  });
}

void host_hub::end() {
  if (ended_) return;
  ended_ = true;
  pulse_timer_.cancel();
  spawner_.reset();  // its children end with it: they are this host's share of the master's work
  children_->close();
  upstream_->close();
  if (on_end_) on_end_();
}

void host_hub::close() { end(); }

}  // namespace fiber::detail
