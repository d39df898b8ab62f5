#include "runtime/master_side.hpp"

#include "core/log.hpp"
#include "fiber/error.hpp"
#include "runtime/nested/upward_relay.hpp"
#include "runtime/worker_side.hpp"

namespace fiber::detail {

master_side::master_side(asio::io_context& io, zmq_context& zctx, const fiber::config& cfg,
                         const std::string& job_id, const job_keys& keys, pending_gets& gets,
                         service_registry& services)
    : io_(io),
      cfg_(cfg),
      job_id_(job_id),
      gets_(gets),
      services_(services),
      channels_(gets, [this](const std::string& peer, multipart&& parts) { return try_send_to_child(peer, std::move(parts)); }),
      links_(std::make_shared<child_links>(
          io, zctx, cfg, job_id, keys,
          [this](const std::string& peer, multipart&& m, std::size_t first) { handle(peer, std::move(m), first); },
          [this](const std::string& id) { return children_.contains(id); })) {
  links_->on_child_left([this](const std::string& peer) {
    auto it = children_.find(peer);
    auto child = it == children_.end() ? nullptr : it->second.lock();
    if (auto j = child ? child->ends_with_link.lock() : nullptr) j->expect_exit();
  });
}

master_side::~master_side() { links_->close(); }

backend& master_side::engine() {
  if (!backend_) backend_ = make_backend(io_, cfg_, job_id_);
  return *backend_;
}

backend& master_side::the_backend() {
  if (auto* forks = links_->forks()) return *forks;  // hub_workers=fork: the hubs start the children
  return engine();
}

void master_side::handle(const std::string& peer, multipart&& m, std::size_t first) {
  if (closed_) return;
  auto h = m.size() > first ? parse_header(m[first]) : std::nullopt;
  if (!h) {
    logf(log_level::error, "malformed message from ", peer, " (", m.size() - std::min(first, m.size()),
         " frames): not a fiber header of protocol version ", protocol_version, "; ignored and reported to the sender");
    (void)try_send_to_child(peer, make_message(kind::failure, {}, "malformed message: not a fiber header of this protocol version"));
    return;
  }
  multipart payload(std::make_move_iterator(m.begin() + static_cast<std::ptrdiff_t>(first) + 1),
                    std::make_move_iterator(m.end()));
  if (is_service_kind(h->type)) return to_service(peer, *h, std::move(payload));
  if (upward_ && upward_->relay(peer, *h, payload)) return;  // nested: it goes on up to the top
  switch (h->type) {
    case kind::hello:
    case kind::done: return child_news(peer, *h, payload);
    case kind::put: return channels_.put_from(peer, h->channel, std::move(payload));
    case kind::get: return channels_.get_from(peer, h->channel, h->request);
    case kind::cancel_get: return channels_.cancel_from(peer, h->channel, h->request);
    case kind::maker_gone: return channels_.maker_gone(h->aux);
    case kind::record:
    case kind::pool_view:
    case kind::record_batch: (void)reports_.take(h->type, h->aux, payload); return;
    case kind::probe: return;  // a pulse: a child across a network is alive (runtime/links/link_pulse)
    default: logf(log_level::error, "unexpected message kind ", int(h->type), " from ", peer, "; ignored");
  }
}

void master_side::to_service(const std::string& peer, const header& h, multipart&& payload) {
  if (auto svc = services_.find(h.channel); svc && svc->serves_children()) {
    svc->on_message(peer, h, std::move(payload));
  } else if (upward_ && (h.flags & flag_expects_reply)) {
    upward_->pass_call_up(peer, h, std::move(payload));  // a manager's proxy passed down more than one level
  } else if (h.flags & flag_expects_reply) {
    // The caller waits for an answer: tell it the service is gone rather than let it hang.
    (void)try_send_to_child(peer, make_message(kind::service_gone, {.channel = h.channel, .request = h.request, .flags = flag_reply}));
  } else {
    logf(log_level::debug, "message for service ", h.channel, " that is gone, from ", peer, "; ignored");
  }
}

void master_side::child_news(const std::string& peer, const header& h, const multipart& payload) {
  auto it = children_.find(peer);
  auto child = it == children_.end() ? nullptr : it->second.lock();
  if (!child) {
    // A child that has been let go (terminated pool worker) may still have been talking.
    logf(log_level::debug, "message from child ", peer, " that is no longer tracked; ignored");
    return;
  }
  std::string text = payload.empty() ? std::string() : payload[0].to_string();
  if (h.type == kind::hello)
    child->on_hello(text);
  else
    child->on_done(h.aux != 0, text);
}

void master_side::forward_channels_to(worker_side* upstream) {
  upward_ = std::make_shared<upward_relay>(
      *upstream, [upstream](multipart&& parts) { upstream->send_upstream(std::move(parts)); }, gets_,
      [this](const std::string& peer, multipart&& parts) { return try_send_to_child(peer, std::move(parts)); });
}

bool master_side::pass_reply_down(const header& h, multipart& payload) {
  return upward_ && upward_->pass_reply_down(h, payload);
}

void master_side::note_prefix(const std::string& routing_id, std::uint32_t prefix) {
  if (upward_) upward_->note_prefix(routing_id, prefix);
}

void master_side::attach_child(const std::string& routing_id, std::weak_ptr<child_endpoint> child) {
  children_[routing_id] = std::move(child);
}

void master_side::detach_child(const std::string& routing_id) {
  children_.erase(routing_id);
  // Its queues and pipes end with it: above (nested), or here with those of its subtree.
  if (upward_) upward_->child_ended(routing_id);
  services_.peer_gone(routing_id);  // e.g. the tree's spawn service ends what it started through the child
  channels_.child_ended(routing_id, /*end_its_channels=*/!upward_ && !closed_);
}

void master_side::send_to_child(const std::string& routing_id, multipart&& parts) {
  if (auto ec = try_send_to_child(routing_id, std::move(parts)))
    logf(log_level::warn, "cannot reach child ", routing_id, ": ", ec.message());
}

void master_side::track_job(const std::shared_ptr<job>& j) {
  std::erase_if(live_jobs_, [](const std::weak_ptr<job>& w) { return w.expired(); });
  live_jobs_.push_back(j);
}

void master_side::untrack_job(const job* j) {
  std::erase_if(live_jobs_, [j](const std::weak_ptr<job>& w) {
    auto held = w.lock();
    return !held || held.get() == j;
  });
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
  links_->close();   // the hubs (and what they forked) before the backend that started them
  backend_.reset();  // ends helpers such as the fork server
  channels_.shutdown();
}

}  // namespace fiber::detail
