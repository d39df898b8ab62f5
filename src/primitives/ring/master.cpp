#include "primitives/ring/master.hpp"

#include <asio/post.hpp>

#include <atomic>
#include <map>
#include <random>

#include "core/log.hpp"
#include "primitives/child_process.hpp"
#include "primitives/ring/wire.hpp"
#include "runtime/runtime.hpp"
#include "runtime/services/service_reply.hpp"

namespace fiber::detail {
namespace {
std::atomic<int> next_ring_number{1};
}

ring_core::ring_core(std::shared_ptr<runtime> rt, int size, void (*f)(ring_member&), ring_options options)
    : rt_(std::move(rt)),
      id_(rt_->new_channel_id()),
      options_(options),
      store_(
          rt_->io(), [this](const std::string& peer, std::uint64_t request, std::string_view value) { reply(peer, request, value); },
          [this](const std::string& peer, std::uint64_t request, errc code, const std::string& why) {
            reply_error(peer, request, code, why);
          }) {
  if (size < 1) throw error(errc::config_error, "a ring needs at least one member; got " + std::to_string(size));
  if (options.max_restarts < 0)
    throw error(errc::config_error, "ring_options::max_restarts must be 0 or more; got " + std::to_string(options.max_restarts));
  entry_ = &require_registered(f);
  number_ = next_ring_number++;
  size_ = size;
  make_members();
}

void ring_core::detach() {
  detached_ = true;  // a restart already posted must not start members nobody will stop
  rt_->services().remove(id_);
}

std::vector<std::shared_ptr<child_process>> ring_core::members() const {
  std::lock_guard lock(members_mutex_);
  return members_;
}

std::shared_ptr<completion<std::monostate>> ring_core::start() {
  if (started_) throw error(errc::already_started, "ring::start() called twice");
  started_ = true;
  rt_->services().add(id_, weak_from_this());
  starting_ = std::make_shared<completion<std::monostate>>();
  auto c = starting_;
  start_members();
  return c;
}

std::shared_ptr<completion<std::monostate>> ring_core::join() {
  if (!started_) throw error(errc::not_started, "ring::join() before start()");
  auto c = std::make_shared<completion<std::monostate>>();
  joins_.push_back(c);
  finish_joins();
  return c;
}

void ring_core::kill_all() noexcept {
  for (auto& m : members_)
    if (m->is_alive()) m->kill_now();
}

bool ring_core::any_alive() const noexcept {
  for (auto& m : members_)
    if (m->is_alive()) return true;
  return false;
}

void ring_core::reply(const std::string& peer, std::uint64_t request, std::string_view value) {
  rt_->master().send_to_child(
      peer, make_message(ring_kind::reply, {.channel = id_, .request = request, .aux = reply_value, .flags = flag_reply}, value));
}

void ring_core::reply_error(const std::string& peer, std::uint64_t request, errc code, const std::string& text) {
  rt_->master().send_to_child(peer, make_message(ring_kind::reply,
                                                 {.channel = id_, .request = request, .aux = reply_failed, .flags = flag_reply},
                                                 failure_reply(code, text)));
}

bool ring_core::restart_if_allowed() {
  if (restarts_ >= options_.max_restarts || !started_ || detached_ || rt_->is_shut_down()) return false;
  restarting_ = true;
  logf(log_level::warn, *lost_, "; restarting the ring (", restarts_ + 1, " of ", options_.max_restarts, ")");
  store_.fail_waiting(*lost_);
  kill_all();
  begin_next_run_soon();
  return true;
}

void ring_core::begin_next_run_soon() {
  asio::post(rt_->io(), [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->maybe_begin_next_run();
  });
}

void ring_core::maybe_begin_next_run() {
  if (!restarting_ || detached_ || any_not_ended()) return;
  restarting_ = false;
  ++restarts_;
  lost_.reset();
  store_.clear();
  running_ = 0;
  make_members();
  start_members();
}

bool ring_core::any_not_ended() const {
  for (auto& m : members_)
    if (m->state() != child_process::phase::created && m->state() != child_process::phase::ended) return true;
  return false;
}

void ring_core::fail_start(int rank, std::error_code ec, const std::string& what) {
  if (restarting_) return;  // the run is being ended anyway
  if (!lost_) lost_ = "ring member " + std::to_string(rank) + " could not start: " + what;
  // A restarted run that cannot start counts as a loss; the first start() fails instead.
  if (!starting_ && restart_if_allowed()) return;
  store_.fail_waiting(*lost_);
  kill_all();
  // The member's own code: a request no node can meet stays errc::unsatisfiable.
  if (auto c = std::exchange(starting_, nullptr)) c->set_error(std::make_exception_ptr(error(ec, *lost_)));
}

void ring_core::finish_joins() {
  // A member that never started (one before it could not be spawned) is not waited for.
  if (restarting_ || any_not_ended()) return;
  for (auto& c : std::exchange(joins_, {})) {
    if (lost_)
      c->set_error(std::make_exception_ptr(error(errc::member_lost, *lost_)));
    else
      c->set_value({});
  }
}

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
  if (r.type == ring_kind::set)
    store_.set(peer, h.request, r.key, std::move(r.value));
  else if (r.type == ring_kind::get)
    store_.get(peer, h.request, r.key, r.timeout, lost_ ? &*lost_ : nullptr);
  else
    store_.add(peer, h.request, r.key, r.delta);
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
    child_process::started_handler done = [weak = weak_from_this(), rank, run](std::error_code ec, const std::string& what) {
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
  for (auto& m : members_) ++per_host[m->where().host];
  std::map<std::string, int> seen;
  for (int r = 0; r < size(); ++r) {
    auto& host = members_[r]->where().host;
    store_.put(ring_local_key(r), std::to_string(seen[host]++) + "," + std::to_string(per_host[host]));
  }
  if (auto c = std::exchange(starting_, nullptr)) c->set_value({});
}

void ring_core::on_member_ended(int rank) {
  if (restarting_) return begin_next_run_soon();
  auto& m = members_[rank];
  int code = m->ending().exit_code().value_or(0);
  auto raised = m->ending().raised();
  if (!lost_ && (code != 0 || raised)) {
    auto how = raised ? "raised " + raised->type() + ": " + raised->message()
                      : code < 0 ? "was killed by signal " + std::to_string(-code) : "exited with code " + std::to_string(code);
    lost_ = "ring member " + std::to_string(rank) + " (" + m->name() + ", pid " + std::to_string(m->pid()) + ") " + how;
    if (restart_if_allowed()) return;
    if (options_.max_restarts > 0) *lost_ += " (after " + std::to_string(restarts_.load()) + " restart" + (restarts_ == 1 ? ")" : "s)");
    logf(log_level::warn, *lost_);
    store_.fail_waiting(*lost_);
  }
  finish_joins();
}

}  // namespace fiber::detail
