// Managers: a server process hosting objects, and the calls to them.
//
// Messages (see runtime/protocol.hpp), channel = manager id:
//   mgr_call   caller -> master -> server   request = call id; frames: [object u64, method u64],
//                                           then the encoded arguments (head, large frames)
//   mgr_reply  server -> master -> caller   request = call id, aux = status; frames:
//                                           0 value: the encoded result
//                                           1 raised, 2 failed (fiber's own errors): a
//                                           runtime/remote_failure
//   mgr_stop   master -> server             exit
// Every call goes through the master, which relays calls made in other processes (a proxy
// passed to a child) under ids of its own, and answers them all when the server dies.
#include "fiber/manager.hpp"

#include <asio/post.hpp>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <typeinfo>
#include <unordered_map>

#include <asio/local/stream_protocol.hpp>
#include <random>

#include "core/frames_reader.hpp"
#include "transport/stream_link.hpp"
#include "primitives/process_state.hpp"
#include "core/demangle.hpp"
#include "core/message_limit.hpp"
#include "core/remote_failure.hpp"

namespace fiber::detail {
void manager_server_main(std::uint64_t manager_id, std::string link_address, std::string link_secret);
}
FIBER_REMOTE(fiber::detail::manager_server_main);

namespace fiber::detail {
namespace {

enum reply_status : std::uint32_t { reply_value = 0, reply_raised = 1, reply_failed = 2 };

// ---- constructors known to the server ----

struct constructor_entry {
  std::string signature;
  hosted_factory make;
};
struct constructor_table {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, constructor_entry> entries;
};
constructor_table& constructors() {
  static auto* t = new constructor_table;  // filled during static initialization
  return *t;
}

std::string failure_text(errc code, const std::string& what) { return remote_failure::fiber_error(code, what).encode(); }

/// Completes `c` from a reply's status and frames.
void complete_from_reply(completion<message>& c, std::uint32_t status, multipart&& payload) {
  if (status == reply_value) {
    auto f = message::frames::whole(std::move(payload));
    c.set_value(message(f));
    return;
  }
  c.set_error(remote_failure::decode(payload.empty() ? std::string_view() : payload[0].to_string_view()).exception());
}

std::shared_ptr<completion<message>> failed_call(errc code, const std::string& what) {
  auto c = std::make_shared<completion<message>>();
  c->set_error(std::make_exception_ptr(error(code, what)));
  return c;
}

multipart call_frames(runtime& rt, const object_ref& ref, std::uint64_t method, writer& args) {
  multipart m;
  std::uint64_t route[2] = {ref.object, method};
  m.emplace_back(route, sizeof route);
  for (auto& f : to_frames(args)) m.push_back(std::move(f));
  return m;
}

std::atomic<int> next_manager_number{1};
}  // namespace

void register_constructor(std::uint64_t id, std::string_view signature, hosted_factory make) {
  auto& t = constructors();
  std::lock_guard lock(t.mutex);
  t.entries.emplace(id, constructor_entry{std::string(signature), make});
}

// ---- the master's side: one service per manager ---------------------------------------------

class manager_core final : public service, public std::enable_shared_from_this<manager_core> {
 public:
  manager_core(std::shared_ptr<runtime> rt, bool async) : rt_(std::move(rt)), id_(rt_->new_channel_id()), async_(async) {}

  std::uint64_t id() const { return id_; }
  bool async() const { return async_; }
  const std::shared_ptr<runtime>& rt() const { return rt_; }
  int pid() const { return proc_ ? proc_->current_pid() : 0; }

  // ---- on the loop thread

  void start() {
    if (stopping_) return;  // shut down before it could start
    rt_->add_service(id_, weak_from_this());
    encoded_call call;
    const auto& entry = require_registered(&manager_server_main);
    call.function_id = entry.id;
    call.function_name = entry.name;
    std::string link_address;
    try {
      if (rt_->the_backend().name() == "local") link_address = listen_for_link();
    } catch (const std::exception& e) {
      logf(log_level::warn, "manager calls go through ZeroMQ: no direct link (", e.what(), ")");
      link_address.clear();
    }
    call.args.value(std::make_tuple(id_, link_address, link_secret_));
    proc_ = make_process_state(rt_, std::move(call));
    proc_->name = "Manager-" + std::to_string(next_manager_number++);
    unique_function<void(std::error_code, std::string)> done = [weak = weak_from_this()](std::error_code ec,
                                                                                       std::string what) {
      if (auto self = weak.lock()) self->on_started(ec, what);
    };
    try {
      begin_start(proc_, done);
    } catch (const error& e) {
      on_started(e.code(), e.what());
      return;
    }
    proc_->on_ended.push_back([weak = weak_from_this()] {
      if (auto self = weak.lock()) self->on_server_ended();
    });
  }

  /// A call made in this process.
  std::shared_ptr<completion<message>> call(const object_ref& ref, std::uint64_t method, writer& args) {
    auto c = std::make_shared<completion<message>>();
    auto relay = next_relay_++;
    pending_.emplace(relay, pending{{}, 0, c});
    forward(relay, call_frames(*rt_, ref, method, args));
    return c;
  }

  /// The manager object is gone: calls from now on are told so by the runtime.
  void detach() { rt_->remove_service(id_); }

  void when_ready(unique_function<void(std::exception_ptr)> f) {
    if (started_ || dead_) return f(dead_ ? std::make_exception_ptr(error(errc::server_lost, dead_text_)) : nullptr);
    ready_waiters_.push_back(std::move(f));
  }

  /// Asks the server to exit; kills it after terminate_grace_ms. `done` once it is gone.
  void shutdown(unique_function<void()> done) {
    if (!proc_ || proc_->state == phase::ended) {
      stopping_ = true;
      if (!dead_) {
        dead_ = true;
        dead_text_ = "the manager was shut down: its objects are gone";
      }
      fail_all();
      return done();
    }
    proc_->on_ended.push_back(std::move(done));
    if (stopping_) return;
    stopping_ = true;
    if (started_) {
      multipart m;
      m.push_back(make_header(kind::mgr_stop, id_));
      if (link_)
        link_->send(std::move(m));
      else
        rt_->send_to_child(proc_->routing_id, std::move(m));
    }
    kill_timer_ = std::make_unique<asio::steady_timer>(rt_->io(), std::chrono::milliseconds(started_ ? rt_->cfg().terminate_grace_ms : 0));
    kill_timer_->async_wait([weak = weak_from_this()](std::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || !self->proc_) return;
      if (self->proc_->state != phase::ended) self->proc_->kill_now();
    });
  }

  void on_message(const std::string& peer, const header& h, multipart&& payload) override {
    if (h.type == kind::mgr_call) {
      // From a child holding a proxy: relay under an id of ours.
      auto relay = next_relay_++;
      pending_.emplace(relay, pending{peer, h.request, nullptr});
      forward(relay, std::move(payload));
    } else if (h.type == kind::mgr_reply) {
      if (!proc_ || peer != proc_->routing_id) return;
      on_reply(h, std::move(payload));
    }
  }

 private:
  struct pending {
    std::string peer;  // a child's call; empty: ours
    std::uint64_t call = 0;
    std::shared_ptr<completion<message>> local;
  };

  void on_reply(const header& h, multipart&& payload) {
    auto it = pending_.find(h.request);
    if (it == pending_.end()) return;
    auto p = std::move(it->second);
    pending_.erase(it);
    if (p.local) {
      complete_from_reply(*p.local, h.aux, std::move(payload));
    } else {
      multipart m;
      m.push_back(make_header(kind::mgr_reply, id_, p.call, h.aux));
      for (auto& f : payload) m.push_back(std::move(f));
      rt_->send_to_child(p.peer, std::move(m));
    }
  }

  /// Local backend: the server's calls travel over a unix socket of their own (io/stream_link).
  std::string listen_for_link() {
    std::random_device rd;
    for (int i = 0; i < 4; ++i) link_secret_ += std::to_string(rd());
    auto address = "fiber-mgr-" + rt_->job_id() + "-" + std::to_string(::getpid()) + "-" + std::to_string(id_);
    acceptor_ = std::make_unique<asio::local::stream_protocol::acceptor>(rt_->io());
    acceptor_->open();
    acceptor_->bind(asio::local::stream_protocol::endpoint(std::string(1, '\0') + address));  // abstract
    acceptor_->listen(4);
    accept_link();
    return address;
  }

  /// Until the server's link arrives; a connection without the secret is closed (below).
  void accept_link() {
    acceptor_->async_accept([weak = weak_from_this()](std::error_code ec, asio::local::stream_protocol::socket s) {
      auto self = weak.lock();
      if (!self || ec || !self->acceptor_) return;
      self->on_link(std::move(s));
      self->accept_link();
    });
  }

  /// A connection is held to a few bytes (the secret) until it proves the secret; only a few
  /// unproven ones may wait at once, and all of them are closed once the server's link is up.
  static constexpr std::size_t max_unproven_links = 8;

  void on_link(asio::local::stream_protocol::socket s) {
    std::erase_if(unproven_links_, [](auto& w) { return w.expired(); });
    if (unproven_links_.size() >= max_unproven_links) {
      logf(log_level::warn, "more than ", max_unproven_links,
           " unproven connections wait on a manager's link; closing a new one");
      return;  // `s` closes here
    }
    auto link = std::make_shared<stream_link>(std::move(s), link_secret_.size());
    link->start(
        [weak = weak_from_this(), link = std::weak_ptr<stream_link>(link)](multipart m) {
          auto self = weak.lock();
          auto l = link.lock();
          if (!self || !l) return;
          if (self->link_ != l) {  // the first message is the secret
            if (!self->link_ && m.size() == 1 && m[0].to_string() == self->link_secret_) {
              l->set_max_message_bytes(self->rt_->cfg().max_message_bytes + stream_link::envelope_bytes);
              self->link_ = std::move(l);
              self->close_unproven_links();
              self->link_up();
            } else {
              logf(log_level::error, "a process that does not know the manager's secret connected to its link; closed");
              l->close();
            }
            return;
          }
          if (m.empty()) return;
          auto h = parse_header(m[0]);
          if (!h || h->type != kind::mgr_reply) return;
          m.erase(m.begin());
          self->on_reply(*h, std::move(m));
        },
        [](std::error_code) {});  // the server's end is seen through its process
    unproven_links_.push_back(link);
  }

  void close_unproven_links() {
    acceptor_.reset();  // one server, one link
    for (auto& w : unproven_links_)
      if (auto l = w.lock(); l && l != link_) l->close();
    unproven_links_.clear();
  }

  void link_up() {
    if (started_) flush_waiting();
  }

  void send_to_server(multipart&& m, std::uint64_t relay) {
    if (link_) return link_->send(std::move(m));
    if (auto ec = rt_->try_send_to_child(proc_->routing_id, std::move(m)))
      fail(relay, errc::server_lost, "cannot reach the manager's server " + proc_->name + ": " + ec.message());
  }

  /// Calls wait until the server is up, and its link too where it has one, so that they all go
  /// one way, in order.
  bool ready_to_send() const { return started_ && (link_ || link_secret_.empty()); }

  void flush_waiting() {
    auto waiting = std::move(waiting_);
    waiting_.clear();
    for (auto& m : waiting) {
      auto relay = parse_header(m[0])->request;
      send_to_server(std::move(m), relay);
    }
    notify_ready();
  }

  void forward(std::uint64_t relay, multipart&& body) {
    if (dead_) return fail(relay, errc::server_lost, dead_text_);
    if (stopping_) return fail(relay, errc::server_lost, "the manager is shutting down: its objects are gone");
    multipart m;
    m.push_back(make_header(kind::mgr_call, id_, relay));
    for (auto& f : body) m.push_back(std::move(f));
    if (!ready_to_send()) {
      waiting_.push_back(std::move(m));
      return;
    }
    send_to_server(std::move(m), relay);
  }

  void fail(std::uint64_t relay, errc code, const std::string& what) {
    auto it = pending_.find(relay);
    if (it == pending_.end()) return;
    auto p = std::move(it->second);
    pending_.erase(it);
    if (p.local) {
      p.local->set_error(std::make_exception_ptr(error(code, what)));
      return;
    }
    auto text = failure_text(code, what);
    multipart m;
    m.push_back(make_header(kind::mgr_reply, id_, p.call, reply_failed));
    m.emplace_back(text.data(), text.size());
    rt_->send_to_child(p.peer, std::move(m));
  }

  void on_started(std::error_code ec, const std::string& what) {
    if (ec) {
      dead_ = true;
      dead_text_ = "the manager's server could not start: " + what;
      fail_all();
      return;
    }
    started_ = true;
    if (ready_to_send()) flush_waiting();
  }

  void on_server_ended() {
    if (kill_timer_) kill_timer_->cancel();
    close_unproven_links();
    if (link_) link_->close();
    if (!dead_) {
      dead_ = true;
      int code = proc_->exit_code;
      auto how = code < 0 ? "killed by signal " + std::to_string(-code) : "exit code " + std::to_string(code);
      dead_text_ = stopping_ ? "the manager was shut down: its objects are gone"
                             : "the manager's server " + proc_->name + " (pid " + std::to_string(proc_->current_pid()) +
                                   ") ended (" + how + "): the objects it hosted are gone";
      if (!stopping_) logf(log_level::warn, dead_text_);
    }
    fail_all();
  }

  void fail_all() {
    waiting_.clear();
    std::vector<std::uint64_t> relays;
    for (auto& [relay, p] : pending_) relays.push_back(relay);
    for (auto relay : relays) fail(relay, errc::server_lost, dead_text_);
    notify_ready();
  }

  void notify_ready() {
    auto waiters = std::move(ready_waiters_);
    ready_waiters_.clear();
    for (auto& f : waiters) f(dead_ ? std::make_exception_ptr(error(errc::server_lost, dead_text_)) : nullptr);
  }

  std::shared_ptr<runtime> rt_;
  std::uint64_t id_;
  bool async_;
  std::shared_ptr<process_state> proc_;
  bool started_ = false, stopping_ = false, dead_ = false;
  std::string dead_text_;
  std::unordered_map<std::uint64_t, pending> pending_;
  std::deque<multipart> waiting_;  // calls made before the server was up
  std::uint64_t next_relay_ = 1;
  std::vector<unique_function<void(std::exception_ptr)>> ready_waiters_;
  std::unique_ptr<asio::steady_timer> kill_timer_;
  std::string link_secret_;  // empty: no direct link
  std::unique_ptr<asio::local::stream_protocol::acceptor> acceptor_;
  std::vector<std::weak_ptr<stream_link>> unproven_links_;
  std::shared_ptr<stream_link> link_;
};

// ---- a worker's side: calls through proxies it was given --------------------------------------

namespace {
class manager_client final : public service {
 public:
  manager_client(runtime& rt, std::uint64_t id) : rt_(rt), id_(id) {}

  std::shared_ptr<completion<message>> call(const object_ref& ref, std::uint64_t method, writer& args) {
    auto c = std::make_shared<completion<message>>();
    auto id = next_call_++;
    pending_.emplace(id, c);
    multipart m;
    m.push_back(make_header(kind::mgr_call, id_, id));
    for (auto& f : call_frames(rt_, ref, method, args)) m.push_back(std::move(f));
    rt_.send_upstream(std::move(m));
    return c;
  }

  void on_message(const std::string&, const header& h, multipart&& payload) override {
    auto it = pending_.find(h.request);
    if (it == pending_.end()) return;
    auto c = std::move(it->second);
    pending_.erase(it);
    complete_from_reply(*c, h.aux, std::move(payload));
  }

 private:
  runtime& rt_;
  std::uint64_t id_;
  std::uint64_t next_call_ = 1;
  std::unordered_map<std::uint64_t, std::shared_ptr<completion<message>>> pending_;
};

// A worker has one runtime; its clients live as long as the process.
std::unordered_map<std::uint64_t, std::shared_ptr<manager_client>>& worker_clients() {
  static auto* m = new std::unordered_map<std::uint64_t, std::shared_ptr<manager_client>>;
  return *m;
}
}  // namespace

std::shared_ptr<completion<message>> send_object_call(runtime& rt, const object_ref& ref, std::uint64_t method,
                                                      writer& args) {
  if (auto over = message_limit_text("the call's arguments", args.total_size(), rt.cfg().max_message_bytes, "send less");
      !over.empty())
    return failed_call(errc::message_too_large, over);
  if (rt.is_shut_down()) return failed_call(errc::closed, "the fiber context has been stopped");
  if (rt.my_role() == runtime::role::master) {
    auto core = std::dynamic_pointer_cast<manager_core>(rt.find_service(ref.manager));
    if (!core)
      return failed_call(errc::server_lost, "manager " + std::to_string(ref.manager) +
                                                " has been shut down (or its server ended): its objects are gone");
    return core->call(ref, method, args);
  }
  auto& clients = worker_clients();
  auto& client = clients[ref.manager];
  if (!client) {
    client = std::make_shared<manager_client>(rt, ref.manager);
    rt.add_service(ref.manager, client);
  }
  return client->call(ref, method, args);
}

std::shared_ptr<completion<message>> send_object_call_now(runtime& rt, const object_ref& ref, std::uint64_t method,
                                                          writer& args) {
  if (rt.in_loop_thread() || rt.owns_loop()) {
    std::shared_ptr<completion<message>> c;
    rt.run_sync([&] { c = send_object_call(rt, ref, method, args); });
    return c;
  }
  // The caller's io_context, called from outside it: sent as soon as the loop runs.
  auto c = std::make_shared<completion<message>>();
  auto kept = std::make_shared<writer>(std::move(args));
  rt.run_soon([&rt, ref, method, kept, c] {
    auto inner = send_object_call(rt, ref, method, *kept);
    auto relay = [c, inner] {
      if (inner->error)
        c->set_error(inner->error);
      else
        c->set_value(std::move(*inner->value));
    };
    if (inner->done)
      relay();
    else
      inner->waiter = relay;
  });
  return c;
}

namespace {
/// Runs `send` on the loop (on this thread when it can take the loop) and waits for its result.
template <class Send>
message block_on_call(runtime& rt, Send&& send) {
  std::shared_ptr<completion<message>> c;
  std::atomic<bool> done{false};
  rt.drive(
      [&] {
        c = send();
        if (c->done)
          rt.notify_done(done);
        else
          c->waiter = [&rt, &done] { rt.notify_done(done); };
      },
      done);
  return take(*c);
}
}  // namespace

message call_object_blocking(runtime& rt, const object_ref& ref, std::uint64_t method, writer& args) {
  return block_on_call(rt, [&] { return send_object_call(rt, ref, method, args); });
}

object_handle adopt_object(object_ref ref) {
  return object_handle{context::default_context().runtime(), ref, nullptr};
}

object_handle own_object(std::shared_ptr<runtime> rt, object_ref ref) {
  // When the last copy in this process goes, the server drops the object.
  std::weak_ptr<runtime> weak = rt;
  auto owner = std::shared_ptr<void>(nullptr, [weak, ref](void*) {
    auto rt = weak.lock();
    if (!rt || rt->is_shut_down()) return;
    // Sent before anything this thread does next, so a later call sees the object gone.
    try {
      rt->run_soon([weak, ref] {
        auto rt = weak.lock();
        if (!rt) return;
        writer none;
        none.value(std::tuple<>());
        (void)send_object_call(*rt, ref, release_method, none);  // nobody waits for the answer
      });
    } catch (const std::exception& e) {
      logf(log_level::warn, "releasing object ", ref.object, " of manager ", ref.manager, ": ", e.what());
    }
  });
  return object_handle{std::move(rt), ref, std::move(owner)};
}

namespace {
object_handle made_object(const std::shared_ptr<manager_core>& core, const message& m) {
  return created_object(core, decode_message<std::uint64_t>(m));
}
}  // namespace

asio::awaitable<std::uint64_t> create_object(std::shared_ptr<manager_core> core, std::uint64_t ctor,
                                             std::shared_ptr<writer> args) {
  auto c = core->call(object_ref{core->id(), ctor, false}, create_method, *args);
  auto m = co_await await_completion(c);
  co_return decode_message<std::uint64_t>(m);
}

object_handle created_object(const std::shared_ptr<manager_core>& core, std::uint64_t id) {
  return own_object(core->rt(), object_ref{core->id(), id, core->async()});
}

object_handle create_object_blocking(const std::shared_ptr<manager_core>& core, std::uint64_t ctor, writer& args) {
  // Through the core itself: the server may not be registered as a service yet.
  auto m = block_on_call(*core->rt(), [&] { return core->call(object_ref{core->id(), ctor, false}, create_method, args); });
  return made_object(core, m);
}

// ---- the server -----------------------------------------------------------------------------

namespace {
/// The server's direct link to the master (local backend), if it has one.
std::shared_ptr<stream_link>& server_link() {
  static std::shared_ptr<stream_link> link;
  return link;
}

void send_reply(std::uint64_t manager, std::uint64_t call, std::uint32_t status, multipart&& body) {
  auto rt = context::default_context().runtime();
  multipart m;
  m.push_back(make_header(kind::mgr_reply, manager, call, status));
  for (auto& f : body) m.push_back(std::move(f));
  if (auto& link = server_link()) {
    if (auto ec = link->send_blocking(m)) logf(log_level::error, "the link to the master failed: ", ec.message());
    return;
  }
  rt->send_upstream(std::move(m));
}

void send_text_reply(std::uint64_t manager, std::uint64_t call, std::uint32_t status, const std::string& text) {
  multipart body;
  body.emplace_back(text.data(), text.size());
  send_reply(manager, call, status, std::move(body));
}

// Built-in types: elements are stored encoded (flat strings), so the server needs no types.
using bytes = std::string;

std::size_t list_index(std::int64_t i, std::size_t size) {
  auto n = static_cast<std::int64_t>(size);
  auto at = i < 0 ? i + n : i;
  if (at < 0 || at >= n)
    throw std::out_of_range("list index " + std::to_string(i) + " out of range for a list of " + std::to_string(size));
  return static_cast<std::size_t>(at);
}

struct list_store {
  std::vector<bytes> items_;
  void append(bytes v) { items_.push_back(std::move(v)); }
  void extend(std::vector<bytes> vs) {
    for (auto& v : vs) items_.push_back(std::move(v));
  }
  bytes get(std::int64_t i) { return items_[list_index(i, items_.size())]; }
  void set(std::int64_t i, bytes v) { items_[list_index(i, items_.size())] = std::move(v); }
  bytes pop() {
    if (items_.empty()) throw std::out_of_range("pop from an empty list");
    auto v = std::move(items_.back());
    items_.pop_back();
    return v;
  }
  std::uint64_t size() { return items_.size(); }
  std::vector<bytes> items() { return items_; }
  void clear() { items_.clear(); }
};

struct dict_store {
  std::map<bytes, bytes> items_;
  void set(bytes k, bytes v) { items_[std::move(k)] = std::move(v); }
  std::optional<bytes> get(bytes k) {
    auto it = items_.find(k);
    if (it == items_.end()) return std::nullopt;
    return it->second;
  }
  bool erase(bytes k) { return items_.erase(k) > 0; }
  bool contains(bytes k) { return items_.count(k) > 0; }
  std::uint64_t size() { return items_.size(); }
  std::vector<std::pair<bytes, bytes>> items() { return {items_.begin(), items_.end()}; }
  void clear() { items_.clear(); }
};

struct namespace_store {
  std::map<std::string, bytes> values_;
  void set(std::string name, bytes v) { values_[std::move(name)] = std::move(v); }
  bytes get(std::string name) {
    auto it = values_.find(name);
    if (it == values_.end()) throw std::out_of_range("the namespace has no value named '" + name + "'; set it first");
    return it->second;
  }
  bool contains(std::string name) { return values_.count(name) > 0; }
  bool erase(std::string name) { return values_.erase(name) > 0; }
  std::vector<std::string> names() {
    std::vector<std::string> out;
    for (auto& [k, v] : values_) out.push_back(k);
    return out;
  }
};
}  // namespace
}  // namespace fiber::detail

FIBER_REMOTE_CLASS(fiber::detail::list_store, append, extend, get, set, pop, size, items, clear);
FIBER_REMOTE_CLASS(fiber::detail::dict_store, set, get, erase, contains, size, items, clear);
FIBER_REMOTE_CLASS(fiber::detail::namespace_store, set, get, contains, erase, names);

namespace fiber::detail {
namespace {
/// A queue whose get() waits for a put without holding up the server's other calls.
class queue_object final : public hosted {
 public:
  bool call(std::uint64_t method, reader& args, writer& out, const deferred_reply& later) override {
    if (method == stable_hash("put")) {
      auto [v] = args.value<std::tuple<bytes>>();
      if (!getters_.empty()) {
        writer w;
        w.value(v);
        getters_.front().send(w);
        getters_.pop_front();
      } else {
        items_.push_back(std::move(v));
      }
      return true;
    }
    if (method == stable_hash("get")) {
      if (items_.empty()) {
        getters_.push_back(later);
        return false;
      }
      out.value(items_.front());
      items_.pop_front();
      return true;
    }
    if (method == stable_hash("try_get")) {
      std::optional<bytes> v;
      if (!items_.empty()) {
        v = std::move(items_.front());
        items_.pop_front();
      }
      out.value(v);
      return true;
    }
    if (method == stable_hash("size")) {
      out.value(static_cast<std::uint64_t>(items_.size()));
      return true;
    }
    throw error(errc::protocol_error, "the queue has no method with id " + std::to_string(method));
  }

 private:
  std::deque<bytes> items_;
  std::deque<deferred_reply> getters_;
};

template <class T>
std::unique_ptr<hosted> make_builtin(reader& in) {
  (void)in.value<std::tuple<>>();
  if constexpr (std::is_same_v<T, queue_object>)
    return std::make_unique<queue_object>();
  else
    return std::make_unique<hosted_object<T>>();
}

[[maybe_unused]] const bool builtins_registered = [] {
  register_constructor(list_type, "fiber::managed_list", &make_builtin<list_store>);
  register_constructor(dict_type, "fiber::managed_dict", &make_builtin<dict_store>);
  register_constructor(namespace_type, "fiber::managed_namespace", &make_builtin<namespace_store>);
  register_constructor(queue_type, "fiber::managed_queue", &make_builtin<queue_object>);
  return true;
}();
}  // namespace

void deferred_reply::send(writer& result) const {
  auto rt = context::default_context().runtime();
  send_reply(manager_, call_, reply_value, to_frames(result));
}

void manager_server_main(std::uint64_t manager_id, std::string link_address, std::string link_secret) {
  auto rt = context::default_context().runtime();
  auto me = current_process().name;
  if (!link_address.empty()) {
    asio::local::stream_protocol::socket s(rt->io());
    s.connect(asio::local::stream_protocol::endpoint(std::string(1, '\0') + link_address));
    // The master is the peer here (it listens at the address it gave this server), so the link
    // takes what the config allows from the start.
    auto link = std::make_shared<stream_link>(std::move(s), rt->cfg().max_message_bytes + stream_link::envelope_bytes);
    multipart hello;
    hello.emplace_back(link_secret.data(), link_secret.size());
    if (auto ec = link->send_blocking(hello)) throw std::system_error(ec, "the manager's link to the master");
    link->start([rt](multipart m) { rt->push_service_message(std::move(m)); }, [](std::error_code) {});
    server_link() = std::move(link);
  }
  struct close_link {
    ~close_link() {
      if (auto& link = server_link()) link->close();
      server_link().reset();
    }
  } closing;
  std::unordered_map<std::uint64_t, std::unique_ptr<hosted>> objects;
  std::uint64_t next_object = 1;
  for (;;) {
    auto m = rt->next_service_message();
    auto h = parse_header(m[0]);
    if (h->type == kind::mgr_stop) return;
    if (h->type != kind::mgr_call) continue;
    auto call = h->request;
    if (m.size() < 3 || m[1].size() != 2 * sizeof(std::uint64_t)) {
      send_text_reply(manager_id, call, reply_failed, failure_text(errc::malformed_message, "malformed manager call"));
      continue;
    }
    std::uint64_t route[2];
    std::memcpy(route, m[1].data(), sizeof route);
    auto [object, method] = route;
    frames_reader framed(m, 2);
    auto& args = framed.get();
    writer out;
    bool user_code = false;
    try {
      if (method == create_method) {
        hosted_factory make = nullptr;
        {
          auto& t = constructors();
          std::lock_guard lock(t.mutex);
          if (auto it = t.entries.find(object); it != t.entries.end()) make = it->second.make;
        }
        if (!make)
          throw error(errc::not_registered, "the manager's server knows no constructor with id " + std::to_string(object) +
                                                ": it runs another build than the caller");
        user_code = true;
        auto made = make(args);
        user_code = false;
        auto id = next_object++;
        objects.emplace(id, std::move(made));
        out.value(id);
      } else if (method == release_method) {
        objects.erase(object);
      } else {
        auto it = objects.find(object);
        if (it == objects.end())
          throw error(errc::closed, "object " + std::to_string(object) + " of this manager was released: every proxy to it "
                                                                         "in the process that created it is gone");
        user_code = true;
        if (!it->second->call(method, args, out, deferred_reply(manager_id, call))) continue;  // answered later
      }
    } catch (const error& e) {
      if (user_code && e.code() != make_error_code(errc::protocol_error) &&
          e.code() != make_error_code(errc::malformed_message))
        send_text_reply(manager_id, call, reply_raised, remote_failure::of_current_exception(me).encode());
      else
        send_text_reply(manager_id, call, reply_failed, failure_text(static_cast<errc>(e.code().value()), e.what()));
      continue;
    } catch (...) {
      send_text_reply(manager_id, call, reply_raised, remote_failure::of_current_exception(me).encode());
      continue;
    }
    if (auto over = message_limit_text("the call's result would", out.total_size(), rt->cfg().max_message_bytes, "return less");
        !over.empty()) {
      // The master would drop the connection rather than take it: say so instead.
      send_text_reply(manager_id, call, reply_failed, failure_text(errc::message_too_large, over));
      continue;
    }
    send_reply(manager_id, call, reply_value, to_frames(out));
  }
}

}  // namespace fiber::detail

// ---- fiber::manager -----------------------------------------------------------------------------

namespace fiber {

manager::manager() : manager(context::default_context(), false) {}
manager::manager(context& ctx) : manager(ctx, false) {}
manager::manager(context& ctx, bool async)
    : rt_(ctx.runtime()), core_(std::make_shared<detail::manager_core>(rt_, async)) {
  if (rt_->my_role() != detail::runtime::role::master)
    throw error(errc::spawn_failed, "a manager cannot be created inside a worker yet; create it in the master and "
                                    "pass its proxies to the workers");
  // Not waiting: with the caller's own io_context the loop may not run yet. Calls made before
  // the server is up wait for it; a server that cannot start fails them (and ready()).
  rt_->run_soon([core = core_] { core->start(); });
}
manager::manager(manager&&) noexcept = default;
manager& manager::operator=(manager&&) noexcept = default;

manager::~manager() {
  if (!core_) return;
  try {
    if (rt_->is_shut_down()) return;
    if (rt_->in_loop_thread() || !rt_->owns_loop()) {
      // Nobody may be running the caller's io_context now: ask, don't wait (context::stop()
      // kills a server that is still there).
      rt_->run_soon([core = core_] {
        core->shutdown([] {});
        core->detach();
      });
      return;
    }
    (void)shutdown().get();
    rt_->run_sync([core = core_] { core->detach(); });
  } catch (const std::exception& e) {
    detail::logf(log_level::error, "stopping a manager: ", e.what());
  }
}

namespace {
/// An op that completes when `c` does (on fiber's loop).
op<void> completion_void_op(const std::shared_ptr<detail::runtime>& rt,
                            std::shared_ptr<detail::completion<std::monostate>> c) {
  struct body {
    static asio::awaitable<void> run(std::shared_ptr<detail::completion<std::monostate>> c) {
      (void)co_await detail::await_completion(std::move(c));
    }
  };
  return {rt, body::run(c), [rt, c] { (void)detail::block_on_completion(*rt, c); }};
}
}  // namespace

op<void> manager::ready() {
  auto c = std::make_shared<detail::completion<std::monostate>>();
  rt_->run_sync([&, core = core_] {
    core->when_ready([c](std::exception_ptr e) {
      if (e)
        c->set_error(e);
      else
        c->set_value({});
    });
  });
  return completion_void_op(rt_, c);
}

op<void> manager::shutdown() {
  auto c = std::make_shared<detail::completion<std::monostate>>();
  rt_->run_sync([&, core = core_] { core->shutdown([c] { c->set_value({}); }); });
  return completion_void_op(rt_, c);
}

int manager::pid() const { return core_ ? core_->pid() : 0; }

async_manager::async_manager() : manager(context::default_context(), true) {}
async_manager::async_manager(context& ctx) : manager(ctx, true) {}

}  // namespace fiber
