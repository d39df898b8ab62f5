// fiber::ring: the master's ring service (members, their ends, the rendezvous store) and the
// facade's operations over it.
#include "fiber/ring.hpp"

#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <random>
#include <unordered_map>

#include "core/log.hpp"
#include "fiber/detail/completion.hpp"
#include "primitives/child_process.hpp"
#include "primitives/ring/wire.hpp"
#include "runtime/runtime.hpp"
#include "runtime/service_reply.hpp"

namespace fiber::detail {
namespace {
std::atomic<int> next_ring_number{1};
}

class ring_core final : public service, public std::enable_shared_from_this<ring_core> {
 public:
  ring_core(std::shared_ptr<runtime> rt, int size, void (*f)(ring_member&), ring_options options)
      : rt_(std::move(rt)), id_(rt_->new_channel_id()), options_(options) {
    if (size < 1) throw error(errc::config_error, "a ring needs at least one member; got " + std::to_string(size));
    if (options.max_restarts < 0)
      throw error(errc::config_error, "ring_options::max_restarts must be 0 or more; got " + std::to_string(options.max_restarts));
    entry_ = &require_registered(f);
    number_ = next_ring_number++;
    size_ = size;
    make_members();
  }
  /// loop: no more messages for this ring.
  void detach() {
    detached_ = true;  // a restart already posted must not start members nobody will stop
    rt_->services().remove(id_);
  }

  int size() const noexcept { return size_; }
  /// The members of the current run (a restart replaces them), from any thread.
  std::vector<std::shared_ptr<child_process>> members() const {
    std::lock_guard lock(members_mutex_);
    return members_;
  }
  const std::shared_ptr<runtime>& rt() const noexcept { return rt_; }
  int restarts() const noexcept { return restarts_.load(); }

  // ---- on the loop

  std::shared_ptr<completion<std::monostate>> start() {
    if (started_) throw error(errc::already_started, "ring::start() called twice");
    started_ = true;
    rt_->services().add(id_, weak_from_this());
    starting_ = std::make_shared<completion<std::monostate>>();
    auto c = starting_;
    start_members();
    return c;
  }
  std::shared_ptr<completion<std::monostate>> join() {
    if (!started_) throw error(errc::not_started, "ring::join() before start()");
    auto c = std::make_shared<completion<std::monostate>>();
    joins_.push_back(c);
    finish_joins();
    return c;
  }

  void kill_all() noexcept {
    for (auto& m : members_)
      if (m->is_alive()) m->kill_now();
  }
  bool any_alive() const noexcept {
    for (auto& m : members_)
      if (m->is_alive()) return true;
    return false;
  }

  void on_message(const std::string& peer, const header& h, multipart&& payload) override;

  void on_shutdown() noexcept override {
    for (auto& [key, list] : waiting_)
      for (auto& w : list) w.timer->cancel();
    waiting_.clear();
  }

 private:
  struct waiter {
    std::string peer;
    std::uint64_t request;
    std::shared_ptr<asio::steady_timer> timer;
  };

  void get(const std::string& peer, std::uint64_t request, const std::string& key, std::chrono::milliseconds timeout);

  void wake(const std::string& key) {
    auto it = waiting_.find(key);
    if (it == waiting_.end()) return;
    auto list = std::move(it->second);
    waiting_.erase(it);
    for (auto& w : list) {
      w.timer->cancel();
      reply(w.peer, w.request, store_[key]);
    }
  }

  void reply(const std::string& peer, std::uint64_t request, std::string_view value) {
    rt_->master().send_to_child(
        peer, make_message(ring_kind::reply, {.channel = id_, .request = request, .aux = reply_value, .flags = flag_reply}, value));
  }
  void reply_error(const std::string& peer, std::uint64_t request, errc code, const std::string& text) {
    rt_->master().send_to_child(peer, make_message(ring_kind::reply,
                                                   {.channel = id_, .request = request, .aux = reply_failed, .flags = flag_reply},
                                                   failure_reply(code, text)));
  }

  /// The members of a run: new processes, a new secret (links of an earlier run cannot mix in).
  void make_members();

  void start_members();

  /// After a loss, with restarts left: every member ends, then a new run starts from nothing.
  bool restart_if_allowed() {
    if (restarts_ >= options_.max_restarts || !started_ || detached_ || rt_->is_shut_down()) return false;
    restarting_ = true;
    logf(log_level::warn, *lost_, "; restarting the ring (", restarts_ + 1, " of ", options_.max_restarts, ")");
    fail_waiting();
    kill_all();
    begin_next_run_soon();
    return true;
  }

  /// Posted: this runs inside a member's own callback, and the next run replaces the members.
  void begin_next_run_soon() {
    asio::post(rt_->io(), [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->maybe_begin_next_run();
    });
  }

  void maybe_begin_next_run() {
    if (!restarting_ || detached_ || any_not_ended()) return;
    restarting_ = false;
    ++restarts_;
    lost_.reset();
    store_.clear();
    running_ = 0;
    make_members();
    start_members();
  }

  bool any_not_ended() const {
    for (auto& m : members_)
      if (m->state() != child_process::phase::created && m->state() != child_process::phase::ended) return true;
    return false;
  }

  void on_member_started(int rank, std::error_code ec, const std::string& what);

  void fail_start(int rank, std::error_code ec, const std::string& what) {
    if (restarting_) return;  // the run is being ended anyway
    if (!lost_) lost_ = "ring member " + std::to_string(rank) + " could not start: " + what;
    // A restarted run that cannot start counts as a loss; the first start() fails instead.
    if (!starting_ && restart_if_allowed()) return;
    fail_waiting();
    kill_all();
    // The member's own code: a request no node can meet stays errc::unsatisfiable.
    if (auto c = std::exchange(starting_, nullptr)) c->set_error(std::make_exception_ptr(error(ec, *lost_)));
  }

  void on_member_ended(int rank);

  /// Every get waiting for a key now fails: the member that would have set it may be the lost one.
  void fail_waiting() {
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (auto& [key, list] : waiting)
      for (auto& w : list) {
        w.timer->cancel();
        reply_error(w.peer, w.request, errc::member_lost, *lost_);
      }
  }

  void finish_joins() {
    // A member that never started (one before it could not be spawned) is not waited for.
    if (restarting_ || any_not_ended()) return;
    for (auto& c : std::exchange(joins_, {})) {
      if (lost_)
        c->set_error(std::make_exception_ptr(error(errc::member_lost, *lost_)));
      else
        c->set_value({});
    }
  }

  std::shared_ptr<runtime> rt_;
  std::uint64_t id_;
  ring_options options_;
  const function_entry* entry_ = nullptr;
  int number_ = 0, size_ = 0;
  mutable std::mutex members_mutex_;  // members_ is replaced on the loop and read by pids()
  std::vector<std::shared_ptr<child_process>> members_;
  std::set<std::string> current_peers_;
  std::atomic<int> restarts_{0};
  bool restarting_ = false;
  bool detached_ = false;  // the ring object is gone
  bool started_ = false;
  int running_ = 0;
  std::shared_ptr<completion<std::monostate>> starting_;
  std::vector<std::shared_ptr<completion<std::monostate>>> joins_;
  std::unordered_map<std::string, std::string> store_;
  std::unordered_map<std::string, std::vector<waiter>> waiting_;
  std::optional<std::string> lost_;
};

void ring_core::on_message(const std::string& peer, const header& h, multipart&& payload) {
  // A member of a run before a restart (killed, its last words still arriving) must not touch
  // the new run's store.
  if (!current_peers_.count(peer)) return reply_error(peer, h.request, errc::member_lost, "this ring was restarted");
  store_request r;
  try {
    r = read_store_request(h, payload);
  } catch (const error& e) {
    return reply_error(peer, h.request, errc::malformed_message, e.reason());
  }
  if (r.type == ring_kind::set) {
    store_[r.key] = std::move(r.value);
    reply(peer, h.request, {});
    wake(r.key);
  } else if (r.type == ring_kind::get) {
    get(peer, h.request, r.key, r.timeout);
  } else {
    std::int64_t sum = r.delta;
    if (auto it = store_.find(r.key); it != store_.end()) {
      auto held = stored_number(it->second);
      if (!held)
        return reply_error(peer, h.request, errc::malformed_message,
                           "add on key '" + r.key + "', which holds '" + it->second + "', not a number");
      sum += *held;
    }
    store_[r.key] = std::to_string(sum);
    reply(peer, h.request, std::string(reinterpret_cast<const char*>(&sum), sizeof sum));
    wake(r.key);
  }
}

void ring_core::get(const std::string& peer, std::uint64_t request, const std::string& key, std::chrono::milliseconds timeout) {
  if (auto it = store_.find(key); it != store_.end()) return reply(peer, request, it->second);
  if (lost_) return reply_error(peer, request, errc::member_lost, *lost_);
  auto timer = std::make_shared<asio::steady_timer>(rt_->io(), timeout);
  timer->async_wait([weak = weak_from_this(), key, request, peer, timeout](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    auto it = self->waiting_.find(key);
    if (it == self->waiting_.end()) return;
    std::erase_if(it->second, [&](const waiter& w) { return w.request == request && w.peer == peer; });
    if (it->second.empty()) self->waiting_.erase(it);
    self->reply_error(peer, request, errc::timeout,
                      "key '" + key + "' was not set within " + std::to_string(timeout.count()) + " ms");
  });
  waiting_[key].push_back({peer, request, std::move(timer)});
}

void ring_core::make_members() {
  std::random_device rd;
  std::string secret;
  for (int i = 0; i < 4; ++i) secret += std::to_string(rd());
  std::vector<std::shared_ptr<child_process>> made;
  for (int rank = 0; rank < size_; ++rank) {
    encoded_call call{entry_->id, entry_->name, {}};
    call.args.value(std::tuple<ring_member>(ring_member(id_, rank, size_, secret, restarts_.load())));
    auto p = child_process::make(rt_, std::move(call));
    p->set_name("Ring-" + std::to_string(number_) + "-" + std::to_string(rank) +
                (restarts_ ? "-r" + std::to_string(restarts_.load()) : ""));
    p->set_owned();
    made.push_back(std::move(p));
  }
  std::lock_guard lock(members_mutex_);
  members_ = std::move(made);
}

void ring_core::start_members() {
  int run = restarts_;
  current_peers_.clear();
  for (int rank = 0; rank < size_; ++rank) {
    child_process::started_handler done = [weak = weak_from_this(), rank, run](std::error_code ec, std::string what) {
      auto self = weak.lock();
      if (self && self->restarts_ == run) self->on_member_started(rank, ec, what);
    };
    try {
      members_[rank]->start(done);
    } catch (const error& e) {
      fail_start(rank, e.code(), e.reason());
      return;
    }
    current_peers_.insert(members_[rank]->peer());
    members_[rank]->when_ended([weak = weak_from_this(), rank, run] {
      auto self = weak.lock();
      if (self && self->restarts_ == run) self->on_member_ended(rank);
    });
  }
}

void ring_core::on_member_started(int rank, std::error_code ec, const std::string& what) {
  if (ec) return fail_start(rank, ec, what);
  if (++running_ < size()) return;
  // Everyone runs: each member's rank among those on its host.
  std::map<std::string, int> per_host;
  for (auto& m : members_) ++per_host[m->host()];
  std::map<std::string, int> seen;
  for (int rank = 0; rank < size(); ++rank) {
    auto& host = members_[rank]->host();
    store_[ring_local_key(rank)] = std::to_string(seen[host]++) + "," + std::to_string(per_host[host]);
    wake(ring_local_key(rank));
  }
  if (auto c = std::exchange(starting_, nullptr)) c->set_value({});
}

void ring_core::on_member_ended(int rank) {
  if (restarting_) return begin_next_run_soon();
  auto& m = members_[rank];
  int code = m->exit_code().value_or(0);
  auto raised = m->raised();
  if (!lost_ && (code != 0 || raised)) {
    auto how = raised ? "raised " + raised->type() + ": " + raised->message()
                      : code < 0 ? "was killed by signal " + std::to_string(-code) : "exited with code " + std::to_string(code);
    lost_ = "ring member " + std::to_string(rank) + " (" + m->name() + ", pid " + std::to_string(m->pid()) + ") " + how;
    if (restart_if_allowed()) return;
    if (options_.max_restarts > 0) *lost_ += " (after " + std::to_string(restarts_.load()) + " restart" + (restarts_ == 1 ? ")" : "s)");
    logf(log_level::warn, *lost_);
    fail_waiting();
  }
  finish_joins();
}


}  // namespace fiber::detail

namespace fiber {

ring::ring(context& ctx, int size, void (*f)(ring_member&), ring_options options)
    : core_(std::make_shared<detail::ring_core>(ctx.runtime(), size, f, options)) {}
ring::ring(ring&&) noexcept = default;
ring& ring::operator=(ring&&) noexcept = default;

ring::~ring() {
  if (!core_) return;
  auto core = core_;
  auto rt = core->rt();
  if (rt->is_shut_down()) return;
  if (core->any_alive()) detail::logf(log_level::warn, "a ring was destroyed while members still ran: killed");
  try {
    // Not waiting: with the caller's own io_context the loop may not run now.
    rt->run_soon([core] {
      core->kill_all();
      core->detach();
    });
  } catch (const std::exception& e) {
    detail::logf(log_level::error, "could not stop a ring's members: ", e.what());
  }
}

int ring::size() const noexcept { return core_->size(); }

op<void> ring::start() {
  return detail::deferred_op<void>(core_->rt(), [core = core_] { return core->start(); });
}

op<void> ring::join() {
  return detail::deferred_op<void>(core_->rt(), [core = core_] { return core->join(); });
}

std::vector<std::optional<int>> ring::exitcodes() const {
  std::vector<std::optional<int>> out;
  for (auto& m : core_->members())
    out.push_back(m->state() == detail::child_process::phase::ended ? m->exit_code() : std::nullopt);
  return out;
}

int ring::restarts() const noexcept { return core_->restarts(); }

std::vector<int> ring::pids() const {
  std::vector<int> out;
  for (auto& m : core_->members()) out.push_back(m->pid());
  return out;
}

}  // namespace fiber
