/// @file
/// Shared values hosted by a manager, like multiprocessing's Manager types:
/// a list, a dict, a namespace of named values and a queue. Handles are values: copy them, pass
/// them to child processes; every process sees the same object.
///
///   auto results = co_await mgr.list<double>();
///   fiber::process p(&worker, results);      // the child appends; the parent reads
///   std::vector<double> all = co_await results.items();
///
/// The server stores each element encoded, so it needs no knowledge of T.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fiber/remote_class.hpp"

namespace fiber {
namespace detail {
template <class T>
T decode_flat_result(const message& m) {
  return decode_flat<T>(decode_message<std::string>(m));
}
template <class T>
std::optional<T> decode_flat_optional(const message& m) {
  auto s = decode_message<std::optional<std::string>>(m);
  if (!s) return std::nullopt;
  return decode_flat<T>(*s);
}
template <class T>
std::vector<T> decode_flat_vector(const message& m) {
  std::vector<T> out;
  for (auto& s : decode_message<std::vector<std::string>>(m)) out.push_back(decode_flat<T>(s));
  return out;
}
inline std::size_t decode_size(const message& m) { return static_cast<std::size_t>(decode_message<std::uint64_t>(m)); }

/// Server-side constructors of the built-in types.
inline constexpr std::uint64_t list_type = stable_hash("fiber::managed_list");
inline constexpr std::uint64_t dict_type = stable_hash("fiber::managed_dict");
inline constexpr std::uint64_t namespace_type = stable_hash("fiber::managed_namespace");
inline constexpr std::uint64_t queue_type = stable_hash("fiber::managed_queue");
}  // namespace detail

/// A list in the manager's server. Indexes may be negative (from the end), as in Python.
template <class T>
class managed_list : public detail::remote_object_base {
 public:
  managed_list() = default;
  /// A proxy on the object `h` names (a manager makes these).
  explicit managed_list(detail::object_handle h) : remote_object_base(std::move(h)) {}

  /// Adds `v` at the end.
  op<void> append(const T& v) const { return fiber_call<void>(id("append"), detail::encode_args(encode_flat(v))); }
  /// Adds each of `vs` at the end, in order, in one call.
  op<void> extend(const std::vector<T>& vs) const {
    std::vector<std::string> flat;
    for (auto& v : vs) flat.push_back(encode_flat(v));
    return fiber_call<void>(id("extend"), detail::encode_args(std::move(flat)));
  }
  /// The element at `index`; a remote_error (std::out_of_range) outside the list.
  op<T> get(std::int64_t index) const {
    return fiber_call<T>(id("get"), detail::encode_args(index), &detail::decode_flat_result<T>);
  }
  /// Replaces the element at `index`; a remote_error (std::out_of_range) outside the list.
  op<void> set(std::int64_t index, const T& v) const {
    return fiber_call<void>(id("set"), detail::encode_args(index, encode_flat(v)));
  }
  /// Removes and returns the last element; a remote_error (std::out_of_range) when empty.
  op<T> pop() const { return fiber_call<T>(id("pop"), detail::encode_args(), &detail::decode_flat_result<T>); }
  /// How many elements it holds.
  op<std::size_t> size() const { return fiber_call<std::size_t>(id("size"), detail::encode_args(), &detail::decode_size); }
  /// A copy of every element, in order.
  op<std::vector<T>> items() const {
    return fiber_call<std::vector<T>>(id("items"), detail::encode_args(), &detail::decode_flat_vector<T>);
  }
  /// Removes every element.
  op<void> clear() const { return fiber_call<void>(id("clear"), detail::encode_args()); }

 private:
  static constexpr std::uint64_t id(std::string_view method) { return detail::stable_hash(method); }
};

/// A dict in the manager's server. Keys compare by their encoding.
template <class K, class V>
class managed_dict : public detail::remote_object_base {
 public:
  managed_dict() = default;
  /// A proxy on the object `h` names (a manager makes these).
  explicit managed_dict(detail::object_handle h) : remote_object_base(std::move(h)) {}

  /// Maps `k` to `v`, replacing what it mapped to.
  op<void> set(const K& k, const V& v) const {
    return fiber_call<void>(id("set"), detail::encode_args(encode_flat(k), encode_flat(v)));
  }
  /// nullopt when the key is absent.
  op<std::optional<V>> get(const K& k) const {
    return fiber_call<std::optional<V>>(id("get"), detail::encode_args(encode_flat(k)), &detail::decode_flat_optional<V>);
  }
  /// True when the key was there.
  op<bool> erase(const K& k) const { return fiber_call<bool>(id("erase"), detail::encode_args(encode_flat(k))); }
  /// True when `k` is a key.
  op<bool> contains(const K& k) const { return fiber_call<bool>(id("contains"), detail::encode_args(encode_flat(k))); }
  /// How many keys it holds.
  op<std::size_t> size() const { return fiber_call<std::size_t>(id("size"), detail::encode_args(), &detail::decode_size); }
  /// A copy of every key and value.
  op<std::vector<std::pair<K, V>>> items() const {
    return fiber_call<std::vector<std::pair<K, V>>>(id("items"), detail::encode_args(), &decode_items);
  }
  /// Removes every key.
  op<void> clear() const { return fiber_call<void>(id("clear"), detail::encode_args()); }

 private:
  static constexpr std::uint64_t id(std::string_view method) { return detail::stable_hash(method); }
  static std::vector<std::pair<K, V>> decode_items(const detail::message& m) {
    std::vector<std::pair<K, V>> out;
    for (auto& [k, v] : detail::decode_message<std::vector<std::pair<std::string, std::string>>>(m))
      out.emplace_back(decode_flat<K>(k), decode_flat<V>(v));
    return out;
  }
};

/// Named values of any type, like multiprocessing's Namespace: ns.set("lr", 0.1); ns.get<double>("lr").
class managed_namespace : public detail::remote_object_base {
 public:
  managed_namespace() = default;
  /// A proxy on the object `h` names (a manager makes these).
  explicit managed_namespace(detail::object_handle h) : remote_object_base(std::move(h)) {}

  /// Sets the value named `name` to `v` (of any type with a codec).
  template <class T>
  op<void> set(const std::string& name, const T& v) const {
    return fiber_call<void>(id("set"), detail::encode_args(name, encode_flat(v)));
  }
  /// A remote_error (std::out_of_range) naming the value when it was never set.
  template <class T>
  op<T> get(const std::string& name) const {
    return fiber_call<T>(id("get"), detail::encode_args(name), &detail::decode_flat_result<T>);
  }
  /// True when a value named `name` was set.
  op<bool> contains(const std::string& name) const { return fiber_call<bool>(id("contains"), detail::encode_args(name)); }
  /// Removes the value named `name`; true when it was there.
  op<bool> erase(const std::string& name) const { return fiber_call<bool>(id("erase"), detail::encode_args(name)); }
  /// The names set.
  op<std::vector<std::string>> names() const {
    return fiber_call<std::vector<std::string>>(id("names"), detail::encode_args());
  }

 private:
  static constexpr std::uint64_t id(std::string_view method) { return detail::stable_hash(method); }
};

/// A queue in the manager's server: get() waits for a put() from any process.
template <class T>
class managed_queue : public detail::remote_object_base {
 public:
  managed_queue() = default;
  /// A proxy on the object `h` names (a manager makes these).
  explicit managed_queue(detail::object_handle h) : remote_object_base(std::move(h)) {}

  /// Adds `v` at the back; a get() waiting in any process takes it.
  op<void> put(const T& v) const { return fiber_call<void>(id("put"), detail::encode_args(encode_flat(v))); }
  /// Waits for an item; other calls to the same manager go on meanwhile.
  op<T> get() const { return fiber_call<T>(id("get"), detail::encode_args(), &detail::decode_flat_result<T>); }
  /// nullopt when empty.
  op<std::optional<T>> try_get() const {
    return fiber_call<std::optional<T>>(id("try_get"), detail::encode_args(), &detail::decode_flat_optional<T>);
  }
  /// How many items wait in it.
  op<std::size_t> size() const { return fiber_call<std::size_t>(id("size"), detail::encode_args(), &detail::decode_size); }

 private:
  static constexpr std::uint64_t id(std::string_view method) { return detail::stable_hash(method); }
};

}  // namespace fiber
