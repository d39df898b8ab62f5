// The server's side of a manager: a process that hosts objects (user classes registered with
// FIBER_REMOTE_CLASS, and the built-in list, dict, namespace and queue) and answers calls on them.
#include <asio/local/stream_protocol.hpp>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "core/flight_recorder.hpp"
#include "core/frames_reader.hpp"
#include "core/message_limit.hpp"
#include "core/log.hpp"
#include "fiber/manager.hpp"
#include "fiber/process.hpp"
#include "primitives/manager/wire.hpp"
#include "runtime/runtime.hpp"

FIBER_REMOTE(fiber::detail::manager_server_main);

namespace fiber::detail {
namespace {
/// A reply to call `call` of manager `manager`.
template <class... Parts>
void send_reply(std::uint64_t manager, std::uint64_t call, std::uint32_t status, Parts&&... parts) {
  context::default_context().runtime()->worker().send_upstream(
      make_message(manager_kind::reply, {.channel = manager, .request = call, .aux = status}, std::forward<Parts>(parts)...));
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
  std::uint64_t size() const { return items_.size(); }
  std::vector<bytes> items() const { return items_; }
  void clear() { items_.clear(); }
};

struct dict_store {
  std::map<bytes, bytes> items_;
  void set(bytes k, bytes v) { items_[std::move(k)] = std::move(v); }
  std::optional<bytes> get(const bytes& k) {
    auto it = items_.find(k);
    if (it == items_.end()) return std::nullopt;
    return it->second;
  }
  bool erase(const bytes& k) { return items_.erase(k) > 0; }
  bool contains(const bytes& k) const { return items_.count(k) > 0; }
  std::uint64_t size() const { return items_.size(); }
  std::vector<std::pair<bytes, bytes>> items() { return {items_.begin(), items_.end()}; }
  void clear() { items_.clear(); }
};

struct namespace_store {
  std::map<std::string, bytes> values_;
  void set(std::string name, bytes v) { values_[std::move(name)] = std::move(v); }
  bytes get(const std::string& name) {
    auto it = values_.find(name);
    if (it == values_.end()) throw std::out_of_range("the namespace has no value named '" + name + "'; set it first");
    return it->second;
  }
  bool contains(const std::string& name) const { return values_.count(name) > 0; }
  bool erase(const std::string& name) { return values_.erase(name) > 0; }
  std::vector<std::string> names() {
    std::vector<std::string> out;
    out.reserve(values_.size());
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
  std::string call_name(std::uint64_t method) const override {
    for (const char* m : {"put", "get", "try_get", "size"})
      if (method == stable_hash(m)) return std::string("queue.") + m;
    return "queue.?";
  }

 private:
  std::deque<bytes> items_;
  std::deque<deferred_reply> getters_;
};

/// One call in the run's recording: 1 in record_manager_calls, and each that raised, from when
/// the server takes it to when it has answered (or kept it to answer later). A record costs about
/// 0.06 µs against a call's round trip of about 8 µs (flight_recorder_bench); sampling keeps a
/// chatty manager's recording small.
class sampled_call {
 public:
  sampled_call(flight_recorder& rec, std::uint64_t& since_recorded, int every, const hosted& object,
               std::uint64_t object_id, std::uint64_t method)
      : rec_(rec), object_(object), object_id_(object_id), method_(method), every_(static_cast<std::uint64_t>(every)) {
    if (!rec_.on() || every <= 0) return;
    // Every call counts toward the next sample, so a record stands for `every` calls.
    sampled_ = ++since_recorded >= static_cast<std::uint64_t>(every);
    if (sampled_) since_recorded = 0;
    watched_ = true;
    start_ = rec_.now_ns();
  }
  void raised() noexcept { raised_ = true; }
  ~sampled_call() {
    if (!watched_ || (!sampled_ && !raised_)) return;
    try {
      auto name = object_.call_name(method_);
      // The built-in objects' classes, as users know them (manager.list() holds a list_store).
      if (name.starts_with("fiber::detail::")) name.erase(0, 15);
      if (raised_) name += " raised";
      rec_.record_at(start_, record_kind::manager_call, rec_.name(""), sampled_ ? every_ : 1, object_id_,
                     rec_.now_ns() - start_, name);
    } catch (...) {
      // The recording is best effort: a call is never failed by it.
    }
  }
  sampled_call(const sampled_call&) = delete;
  sampled_call& operator=(const sampled_call&) = delete;

 private:
  flight_recorder& rec_;
  const hosted& object_;
  std::uint64_t object_id_, method_, every_;
  bool watched_ = false, sampled_ = false, raised_ = false;
  std::uint64_t start_ = 0;
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

void manager_server_main(std::uint64_t manager_id) {
  auto rt = context::default_context().runtime();
  auto me = current_process().name;
  std::unordered_map<std::uint64_t, std::unique_ptr<hosted>> objects;
  std::uint64_t next_object = 1;
  std::uint64_t since_recorded = 0;  // calls since the last one recorded
  for (;;) {
    auto m = rt->worker().next_service_message();
    auto h = header_of(m, "the manager's master");
    if (h.type == manager_kind::stop) return;
    if (h.type != manager_kind::call) continue;
    auto call = h.request;
    if (m.size() < 3 || m[1].size() != 2 * sizeof(std::uint64_t)) {
      send_reply(manager_id, call, reply_failed, failure_reply(errc::malformed_message, "malformed manager call"));
      continue;
    }
    std::uint64_t route[2];
    std::memcpy(route, m[1].data(), sizeof route);
    auto [object, method] = route;
    frames_reader framed(m, 2);
    auto& args = framed.get();
    writer out;
    bool user_code = false;
    std::optional<sampled_call> sampled;
    try {
      if (method == create_method) {
        auto make = find_constructor(object);
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
        sampled.emplace(rt->observer().recorder(), since_recorded, rt->cfg().record_manager_calls, *it->second, object, method);
        if (!it->second->call(method, args, out, deferred_reply(manager_id, call))) continue;  // answered later
      }
    } catch (const error& e) {
      if (sampled) sampled->raised();
      if (user_code && e.code() != make_error_code(errc::protocol_error) &&
          e.code() != make_error_code(errc::malformed_message))
        send_reply(manager_id, call, reply_raised, remote_failure::of_current_exception(me).encode());
      else
        send_reply(manager_id, call, reply_failed, failure_reply(static_cast<errc>(e.code().value()), e.what()));
      continue;
    } catch (...) {
      if (sampled) sampled->raised();
      send_reply(manager_id, call, reply_raised, remote_failure::of_current_exception(me).encode());
      continue;
    }
    if (auto over = message_limit_text("the call's result would", out.total_size(), rt->cfg().max_message_bytes, "return less");
        !over.empty()) {
      // The master would drop the connection rather than take it: say so instead.
      send_reply(manager_id, call, reply_failed, failure_reply(errc::message_too_large, over));
      continue;
    }
    send_reply(manager_id, call, reply_value, to_frames(out));
  }
}

}  // namespace fiber::detail
