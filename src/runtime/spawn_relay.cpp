#include "runtime/spawn_relay.hpp"

#include <csignal>

#include "core/log.hpp"
#include "runtime/master_side.hpp"
#include "runtime/worker_side.hpp"
#include "transport/reachable_address.hpp"

namespace fiber::detail {

/// What the top master said of a child asked for here.
struct spawn_relay::state {
  std::uint64_t request = 0;
  bool identified = false, running = false, exited = false;
  spawn_wire::child_news news;
  unique_function<void()> on_identified, on_running;
  unique_function<void(int)> on_exit;
};

namespace {

class relayed_job final : public job {
 public:
  relayed_job(std::shared_ptr<spawn_relay> relay, std::shared_ptr<spawn_relay::state> s)
      : relay_(std::move(relay)), s_(std::move(s)) {}

  int pid() const noexcept override { return s_->news.pid; }
  void on_exit(unique_function<void(int)> f) override {
    if (s_->exited)
      f(s_->news.code);
    else
      s_->on_exit = std::move(f);
  }
  void signal(int sig) noexcept override {
    if (!s_->exited) relay_->send_up(spawn_wire::signal, s_->request, static_cast<std::uint32_t>(sig));
  }
  // This process cannot reap it: the top master kills it, and hears its end.
  void kill_and_reap() noexcept override { signal(SIGKILL); }
  std::string exit_detail() const override { return s_->news.detail; }
  bool never_fits() const noexcept override { return s_->news.never_fits; }
  void when_identified(unique_function<void()> f) override {
    if (s_->identified)
      f();
    else
      s_->on_identified = std::move(f);
  }
  void when_running(unique_function<void()> f) override {
    if (s_->running)
      f();
    else
      s_->on_running = std::move(f);
  }
  void reported_pid(int pid) override {
    if (s_->exited || pid <= 0) return;
    // A backend that cannot ask its engine (Slurm) knows the pid only from the child: the top's
    // news may have said 0.
    if (!s_->news.pid) s_->news.pid = pid;
    relay_->send_up(spawn_wire::reported_pid, s_->request, static_cast<std::uint32_t>(pid));
  }
  void expect_exit() override {
    if (!s_->exited) relay_->send_up(spawn_wire::expect_exit, s_->request, 0);
  }

 private:
  std::shared_ptr<spawn_relay> relay_;
  std::shared_ptr<spawn_relay::state> s_;
};

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
    auto s = std::make_shared<spawn_relay::state>();
    relay_->start(spec, s);
    return std::make_unique<relayed_job>(relay_, std::move(s));
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

void spawn_relay::start(const spawn_spec& spec, const std::shared_ptr<state>& s) {
  s->request = ++next_request_;
  own_[s->request] = s;
  send_up(spawn_wire::start, s->request, 0, spawn_wire::encode(spec, own_handle_));
}

void spawn_relay::send_up(kind k, std::uint64_t request, std::uint32_t aux) noexcept { send_up(k, request, aux, {}); }

void spawn_relay::send_up(kind k, std::uint64_t request, std::uint32_t aux, std::string body) noexcept {
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
    send_up(spawn_wire::start, ours, 0, std::move(text));
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
    case spawn_wire::event::identified:
      if (news.pid) s->news.pid = news.pid;
      s->identified = true;
      if (auto f = std::move(s->on_identified)) f();
      return;
    case spawn_wire::event::running:
      s->running = true;
      if (auto f = std::move(s->on_running)) f();
      return;
    case spawn_wire::event::exited: {
      own_.erase(o);
      if (news.pid) s->news.pid = news.pid;
      s->news.code = news.code;
      s->news.detail = news.detail;
      s->news.never_fits = news.never_fits;
      s->exited = true;
      // One that never ran was never identified: whoever waits for that hears its end instead.
      if (auto f = std::move(s->on_exit)) f(news.code);
      return;
    }
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
