#include "runtime/nested/spawn_relay.hpp"

#include <csignal>

#include "runtime/nested/relayed_run.hpp"
#include "core/log.hpp"
#include "runtime/master_side.hpp"
#include "runtime/worker_side.hpp"
#include "transport/reachable_address.hpp"

namespace fiber::detail {

namespace {

class relayed_backend final : public tcp_backend {
 public:
  relayed_backend(std::shared_ptr<spawn_relay> relay, std::string name) : relay_(std::move(relay)), name_(std::move(name)) {
    // Its children dial this process where its own master reaches it (the container's, the
    // pod's, the node's address); the engine's network joins them as it joins the tree's rings.
    bind_host_ = advertise_host_ = reachable_address();
  }
  std::string name() const override { return name_; }
  // The top master checks what a child needs when it starts it: a request no node can meet
  // comes back as an end that never fits, so start() fails with errc::unsatisfiable here too.
  std::unique_ptr<job> spawn(const spawn_spec& spec) override {
    auto run = std::make_shared<relayed_run>(
        [relay = relay_](kind k, std::uint64_t request, std::uint32_t aux) { relay->send_up(k, request, aux); });
    relay_->start(spec, run);
    return std::make_unique<job>(std::move(run));
  }

 private:
  std::shared_ptr<spawn_relay> relay_;
  std::string name_;
};

}  // namespace

spawn_relay::spawn_relay(worker_side& up, master_side& down, std::string backend_name, std::uint64_t own_handle)
    : up_(up), down_(down), backend_name_(std::move(backend_name)), own_handle_(own_handle) {}

std::unique_ptr<backend> spawn_relay::make_backend() {
  return std::make_unique<relayed_backend>(shared_from_this(), backend_name_);
}

void spawn_relay::start(const spawn_spec& spec, const std::shared_ptr<relayed_run>& run) {
  run->request = ++next_request_;
  own_[run->request] = run;
  send_up(spawn_wire::start, run->request, 0, spawn_wire::encode(spec, own_handle_));
}

void spawn_relay::send_up(kind k, std::uint64_t request, std::uint32_t aux) noexcept { send_up(k, request, aux, {}); }

void spawn_relay::send_up(kind k, std::uint64_t request, std::uint32_t aux, const std::string& body) noexcept {
  try {
    route r{.channel = spawn_wire::service_id, .request = request, .aux = aux};
    up_.send_upstream(body.empty() ? make_message(k, r) : make_message(k, r, body));
  } catch (const std::exception& e) {
    logf(log_level::warn, "could not ask the master above about a nested child: ", e.what());
  }
}

void spawn_relay::on_message(const std::string& peer, const header& h, multipart&& payload) {
  auto text = payload.empty() ? std::string() : payload[0].to_string();
  if (peer.empty()) {  // from above: news of a child
    if (h.type != spawn_wire::news) return;
    hear(h.request, static_cast<spawn_wire::event>(h.aux), spawn_wire::decode_news(text));
    return;
  }
  // From a child of this process: passed up under a number of ours.
  if (h.type == spawn_wire::start) {
    auto ours = ++next_request_;
    passed_[ours] = {peer, h.request};
    passed_ids_[{peer, h.request}] = ours;
    send_up(spawn_wire::start, ours, 0, text);
    return;
  }
  auto it = passed_ids_.find({peer, h.request});
  if (it != passed_ids_.end()) send_up(h.type, it->second, h.aux);
}

void spawn_relay::hear(std::uint64_t request, spawn_wire::event e, const spawn_wire::child_news& news) {
  if (auto p = passed_.find(request); p != passed_.end()) {
    auto [peer, theirs] = p->second;
    if (e == spawn_wire::event::exited) {
      passed_ids_.erase({peer, theirs});
      passed_.erase(p);
    }
    (void)down_.try_send_to_child(peer, make_message(spawn_wire::news,
                                                     {.channel = spawn_wire::service_id, .request = theirs,
                                                      .aux = static_cast<std::uint32_t>(e), .flags = flag_reply},
                                                     spawn_wire::encode(news)));
    return;
  }
  auto o = own_.find(request);
  if (o == own_.end()) return;
  auto s = o->second.lock();
  if (!s) {
    if (e == spawn_wire::event::exited) own_.erase(o);
    return;
  }
  switch (e) {
    case spawn_wire::event::identified: return s->identified(news.pid);
    case spawn_wire::event::running: return s->running();
    case spawn_wire::event::exited:
      own_.erase(o);
      return s->exited(news);
  }
}

void spawn_relay::on_peer_gone(const std::string& peer) noexcept {
  // Its children's news will find nobody; the top master ends them when it hears of its end.
  for (auto it = passed_ids_.lower_bound({peer, 0}); it != passed_ids_.end() && it->first.first == peer;) {
    passed_.erase(it->second);
    it = passed_ids_.erase(it);
  }
}

}  // namespace fiber::detail
