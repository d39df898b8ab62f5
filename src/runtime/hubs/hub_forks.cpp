#include "runtime/hubs/hub_forks.hpp"

#include <asio/post.hpp>
#include <algorithm>
#include <csignal>

#include "core/log.hpp"
#include "fiber/error.hpp"
#include "backend/engine_run.hpp"
#include "runtime/nested/spawn_wire.hpp"

namespace fiber::detail {

/// A child forked by a host hub, as the master sees it: queued until a hub has room for it,
/// identified and running as its hub's news say, ended by its hub's news or by its hub's end.
struct hub_forks::state final : engine_run, std::enable_shared_from_this<hub_forks::state> {
  explicit state(std::weak_ptr<hub_forks> f)
      : engine_run({.queued = true, .identified_later = true}), forks(std::move(f)) {}

  std::weak_ptr<hub_forks> forks;
  std::uint64_t start = 0;
  spawn_spec spec;
  std::string host;  // once placed
  bool placed = false, exited = false;
  std::string reason;

  void signal(int sig) noexcept override {
    try {
      if (auto f = forks.lock()) f->signal(shared_from_this(), sig);
    } catch (const std::exception& e) {  // out of memory for the hub's message
      logf(log_level::error, "could not send signal ", sig, " to a child forked by a host hub: ", e.what());
    }
  }
  // The hub reaps it; the master hears its end from the hub.
  void kill_and_reap() noexcept override { signal(SIGKILL); }
  void forget() noexcept override {
    try {
      if (auto f = forks.lock()) f->forget(shared_from_this());
    } catch (const std::exception& e) {
      logf(log_level::error, "could not stop a child forked by a host hub: ", e.what());
    }
  }
  std::string placement() const override { return placed ? "host " + host + ", forked by its hub" : ""; }
  std::string pending_reason() const override { return reason; }

  void identified(int p) {
    pid = p;
    mark_identified();
  }
  void running() { mark_running(); }
  void ended(int code, std::string detail) { report_end(code, std::move(detail)); }
  void went_past_memory(const memory_stop& m) { stopped_for_memory(m); }
  void waits_because(std::string why) {
    reason = std::move(why);
    pending_changed();
  }
};

namespace {

/// A host's CPUs for its children: all but one, which its hub keeps.
int child_cpus(int cpus) { return std::max(cpus - 1, 1); }

}  // namespace

hub_forks::hub_forks(asio::io_context& io, backend& engine, std::shared_ptr<direct_listener> listener,
                     const std::vector<hub_host>& hosts)
    : io_(io), engine_(engine), listener_(std::move(listener)) {
  for (auto& h : hosts) hosts_[h.name] = {.free = child_cpus(h.cpus), .cpus = child_cpus(h.cpus)};
}

hub_forks::~hub_forks() { closed_ = true; }

void hub_forks::check_capacity(const spawn_spec& spec) const {
  if (spec.gpu > 0)
    throw error(errc::unsatisfiable, spec.name + " asks for " + std::to_string(spec.gpu) +
                                         " GPU(s), and hub_workers=fork starts children inside each host hub's "
                                         "allocation, which holds no GPUs: set hub_workers=engine for children "
                                         "that need GPUs");
  int most = 0;
  for (auto& [name, h] : hosts_) most = std::max(most, h.cpus);
  if (spec.cpu > most)
    throw error(errc::unsatisfiable, spec.name + " asks for " + std::to_string(spec.cpu) +
                                         " CPUs, and with hub_workers=fork a host's hub gives its children at most " +
                                         std::to_string(most) +
                                         " (the host's CPUs but one, for the hub): ask for fewer, or set "
                                         "hub_workers=engine");
  engine_.check_capacity(spec);
}

std::unique_ptr<job> hub_forks::spawn(const spawn_spec& spec) {
  check_capacity(spec);
  auto s = std::make_shared<state>(weak_from_this());
  s->start = ++next_start_;
  s->spec = spec;
  s->spec.cpu = std::max(spec.cpu, 1);
  waiting_.push_back(s);
  set_reason(s, waiting_reason());
  // From the loop: the caller attaches its callbacks first.
  asio::post(io_, [weak = weak_from_this()] {
    if (auto self = weak.lock(); self && !self->closed_) self->place();
  });
  return std::make_unique<job>(std::move(s));
}

std::string hub_forks::waiting_reason() const {
  for (auto& [name, h] : hosts_)
    if (!h.hub.empty()) return "every host hub's CPUs are taken by its children (hub_workers=fork)";
  return "waiting for the host hubs to start (hub_workers=fork)";
}

void hub_forks::set_reason(const std::shared_ptr<state>& s, std::string reason) { s->waits_because(std::move(reason)); }

void hub_forks::place() {
  while (!waiting_.empty()) {
    auto s = waiting_.front();
    host* best = nullptr;
    std::string best_name;
    for (auto& [name, h] : hosts_)
      if (!h.hub.empty() && h.free >= s->spec.cpu && (!best || h.free > best->free)) {
        best = &h;
        best_name = name;
      }
    if (!best) break;  // first come, first placed: nothing overtakes the head
    waiting_.pop_front();
    best->free -= s->spec.cpu;
    s->placed = true;
    s->host = best_name;
    set_reason(s, {});
    placed_[s->start] = s;
    send(best->hub, hub_wire::op::start, s->start, spawn_wire::encode(s->spec, 0));
  }
  auto reason = waiting_reason();
  for (auto& s : waiting_) set_reason(s, reason);
}

void hub_forks::send(const std::string& hub, hub_wire::op o, std::uint64_t start, const std::string& body) {
  multipart parts;
  parts.push_back(hub_wire::frame(o, std::to_string(start)));
  parts.emplace_back(body.data(), body.size());
  // A hub whose link just closed: unlinked() ends its children.
  if (auto ec = listener_->send(hub, std::move(parts)))
    logf(log_level::warn, "cannot reach host hub ", hub, ": ", ec.message());
}

void hub_forks::linked(const std::string& host_name, const std::string& hub) {
  auto it = hosts_.find(host_name);
  if (it == hosts_.end()) return;
  if (!it->second.hub.empty() && it->second.hub != hub) lose(host_name);  // the hub it replaces went
  it->second.hub = hub;
  it->second.free = it->second.cpus;
  logf(log_level::debug, "host hub ", hub, " on ", host_name, " linked: ", it->second.cpus, " CPUs for children");
  place();
}

void hub_forks::unlinked(const std::string& hub) {
  std::string host_name;
  for (auto& [name, h] : hosts_)
    if (h.hub == hub) {
      host_name = name;
      h.hub.clear();
    }
  if (host_name.empty()) return;
  lose(host_name);
  for (auto& s : waiting_) set_reason(s, waiting_reason());
}

void hub_forks::lose(const std::string& host_name) {
  std::vector<std::shared_ptr<state>> lost;
  for (auto& [start, s] : placed_)
    if (s->host == host_name) lost.push_back(s);
  // Its children die with its hub (their parent-death signal; the engine ends its job's processes).
  for (auto& s : lost) end(s, -SIGKILL, "its host hub on " + host_name + " ended");
}

void hub_forks::news(const std::string& hub, const std::string& start_text, multipart&& parts) {
  std::uint64_t start = 0;
  try {
    start = std::stoull(start_text);
  } catch (const std::exception&) {
    return logf(log_level::error, "host hub ", hub, " sent news of start '", start_text, "', which is no number; ignored");
  }
  auto it = placed_.find(start);
  if (it == placed_.end() || parts.size() != 2) return;
  auto s = it->second;
  if (s->host.empty() || hosts_[s->host].hub != hub) return;  // from a hub since replaced
  auto news = spawn_wire::decode_news(parts[1].to_string_view());
  auto event = static_cast<spawn_wire::event>(std::atoi(parts[0].to_string().c_str()));
  switch (event) {
    case spawn_wire::event::identified: return s->identified(news.pid);
    case spawn_wire::event::running: return s->running();
    case spawn_wire::event::exited:
      if (news.pid) s->pid = news.pid;
      if (news.memory) s->went_past_memory(*news.memory);
      return end(s, news.code, news.detail);
  }
}

void hub_forks::end(const std::shared_ptr<state>& s, int code, std::string detail) {
  if (s->exited) return;
  s->exited = true;
  if (s->placed) {
    placed_.erase(s->start);
    if (auto h = hosts_.find(s->host); h != hosts_.end() && !h->second.hub.empty()) h->second.free += s->spec.cpu;
    asio::post(io_, [weak = weak_from_this()] {
      if (auto self = weak.lock(); self && !self->closed_) self->place();
    });
  } else {
    std::erase(waiting_, s);
  }
  // From the loop, not inside whoever ended it (a signal from the job's owner).
  asio::post(io_, [s, code, detail = std::move(detail)]() mutable { s->ended(code, std::move(detail)); });
}

void hub_forks::signal(const std::shared_ptr<state>& s, int sig) {
  if (s->exited) return;
  if (!s->placed) {  // still waiting for room: it ends as if the signal had killed it
    if (sig == SIGTERM || sig == SIGKILL || sig == SIGINT) end(s, -sig, "it was still waiting for a host hub's CPUs");
    return;
  }
  send(hosts_[s->host].hub, hub_wire::op::signal, s->start, std::to_string(sig));
}

void hub_forks::forget(const std::shared_ptr<state>& s) {
  if (s->exited || closed_) return;
  if (!s->placed) {
    std::erase(waiting_, s);
    s->exited = true;
    return;
  }
  signal(s, SIGKILL);  // its end, heard from the hub, frees its CPUs
}

void hub_forks::given_up(const std::string& host_name, const std::string& why) {
  if (auto it = hosts_.find(host_name); it != hosts_.end()) it->second.gone = true;
  for (auto& [name, h] : hosts_)
    if (!h.gone) return;
  auto waiting = waiting_;
  for (auto& s : waiting) end(s, 127, "no host hub runs to start it: " + why);
}

}  // namespace fiber::detail
