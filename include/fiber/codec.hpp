/// @file
/// How values travel between processes.
///
/// `fiber::codec<T>` is the customization point: specialize it with
///   static void encode(fiber::writer&, const T&);
///   static T decode(fiber::reader&);
/// The defaults below cover arithmetic and enum types, strings, the standard containers, pair,
/// tuple, optional, variant, shared_ptr, unique_ptr and plain aggregates, field by field (C array
/// members included).
/// Large contiguous ranges of trivially copyable values travel as frames of their own, not copied
/// into the header frame. A shared_ptr keeps its sharing within one message, as pickle's memo
/// does: an object several values point to travels once (and, in a pool, once per chunk of
/// items). The writer and reader themselves are in fiber/encoding.hpp.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "fiber/detail/aggregate_fields.hpp"
#include "fiber/encoding.hpp"

namespace fiber {

namespace detail {
/// The fewest header bytes one encoded T takes: a count read from a peer is refused when the
/// bytes left cannot hold that many elements, before anything is allocated for them (a count
/// bounded by one byte per element would let a message of N bytes reserve N strings, 32 N bytes).
/// A codec says it with `static constexpr std::size_t min_bytes`; one that does not counts as 1.
template <class T>
constexpr std::size_t min_encoded_bytes() {
  if constexpr (requires { codec<T>::min_bytes; })
    return codec<T>::min_bytes;
  else
    return 1;
}
/// What bounds a count of T: at least one byte each, so a count of values that take none (an
/// empty aggregate, std::monostate) is still bounded by the bytes left.
template <class T>
inline constexpr std::size_t count_bound_bytes = min_encoded_bytes<T>() > 0 ? min_encoded_bytes<T>() : 1;
}  // namespace detail

// ---- defaults -------------------------------------------------------------------------------
/// @cond codec_defaults
// The specializations are the list in this file's description: the reference documents the
// customization point, not each type's encoding.

template <class T>
struct codec<T, std::enable_if_t<(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) || std::is_enum_v<T>>> {
  static constexpr std::size_t min_bytes = sizeof(T);
  static void encode(writer& w, const T& v) { w.pod(v); }
  static T decode(reader& r) { return r.pod<T>(); }
};

/// One byte, 0 or 1: any other byte is malformed (a bool holding it would be undefined behaviour).
template <>
struct codec<bool> {
  static constexpr std::size_t min_bytes = 1;
  static void encode(writer& w, bool v) { w.pod(static_cast<std::uint8_t>(v)); }
  static bool decode(reader& r) {
    auto b = r.pod<std::uint8_t>();
    if (b > 1) detail::throw_malformed("bool", 1, b);
    return b == 1;
  }
};

template <>
struct codec<std::string> {
  static constexpr std::size_t min_bytes = sizeof(std::uint64_t);  ///< its length
  static void encode(writer& w, const std::string& s) { w.range(s.data(), s.size()); }
  static std::string decode(reader& r) {
    auto s = r.range();
    return {reinterpret_cast<const char*>(s.data()), s.size()};
  }
};

template <>
struct codec<std::monostate> {
  static constexpr std::size_t min_bytes = 0;
  static void encode(writer&, const std::monostate&) {}
  static std::monostate decode(reader&) { return {}; }
};

template <class T, class A>
struct codec<std::vector<T, A>> {
  static constexpr std::size_t min_bytes = sizeof(std::uint64_t);  ///< its count or length
  static void encode(writer& w, const std::vector<T, A>& v) {
    if constexpr (std::is_trivially_copyable_v<T> && !std::is_same_v<T, bool>) {
      w.range(v.data(), v.size() * sizeof(T));
    } else {
      w.size(v.size());
      for (decltype(auto) e : v) {
        const T& element = e;  // vector<bool> yields proxies
        w.value(element);
      }
    }
  }
  static std::vector<T, A> decode(reader& r) {
    std::vector<T, A> v;
    if constexpr (std::is_trivially_copyable_v<T> && !std::is_same_v<T, bool>) {
      auto s = r.range();
      if (s.size() % sizeof(T)) detail::throw_malformed("vector element alignment", sizeof(T), s.size());
      v.resize(s.size() / sizeof(T));
      if (!s.empty()) std::memcpy(v.data(), s.data(), s.size());
    } else {
      auto n = r.size(detail::count_bound_bytes<T>);
      v.reserve(n);
      for (std::size_t i = 0; i < n; ++i) v.push_back(r.value<T>());
    }
    return v;
  }
};

template <class T, std::size_t N>
struct codec<std::array<T, N>> {
  static constexpr std::size_t min_bytes = N * detail::min_encoded_bytes<T>();
  static void encode(writer& w, const std::array<T, N>& a) {
    for (auto& e : a) w.value(e);
  }
  static std::array<T, N> decode(reader& r) {
    std::array<T, N> a;
    for (auto& e : a) e = r.value<T>();
    return a;
  }
};

namespace detail {
template <class M>
struct map_codec {
  static constexpr std::size_t min_bytes = sizeof(std::uint64_t);
  static void encode(writer& w, const M& m) {
    w.size(m.size());
    for (auto& [k, v] : m) {
      w.value(k);
      w.value(v);
    }
  }
  static M decode(reader& r) {
    M m;
    auto n = r.size(count_bound_bytes<typename M::key_type> + min_encoded_bytes<typename M::mapped_type>());
    for (std::size_t i = 0; i < n; ++i) {
      auto k = r.value<typename M::key_type>();
      m.emplace(std::move(k), r.value<typename M::mapped_type>());
    }
    return m;
  }
};
}  // namespace detail

template <class K, class V, class C, class A>
struct codec<std::map<K, V, C, A>> : detail::map_codec<std::map<K, V, C, A>> {};
template <class K, class V, class H, class E, class A>
struct codec<std::unordered_map<K, V, H, E, A>> : detail::map_codec<std::unordered_map<K, V, H, E, A>> {};

template <class K, class C, class A>
struct codec<std::set<K, C, A>> {
  static constexpr std::size_t min_bytes = sizeof(std::uint64_t);
  static void encode(writer& w, const std::set<K, C, A>& s) {
    w.size(s.size());
    for (auto& k : s) w.value(k);
  }
  static std::set<K, C, A> decode(reader& r) {
    std::set<K, C, A> s;
    auto n = r.size(detail::count_bound_bytes<K>);
    for (std::size_t i = 0; i < n; ++i) s.insert(r.value<K>());
    return s;
  }
};

template <class A, class B>
struct codec<std::pair<A, B>> {
  static constexpr std::size_t min_bytes = detail::min_encoded_bytes<A>() + detail::min_encoded_bytes<B>();
  static void encode(writer& w, const std::pair<A, B>& p) {
    w.value(p.first);
    w.value(p.second);
  }
  static std::pair<A, B> decode(reader& r) {
    auto a = r.value<A>();
    return {std::move(a), r.value<B>()};
  }
};

template <class... Ts>
struct codec<std::tuple<Ts...>> {
  static constexpr std::size_t min_bytes = (std::size_t{0} + ... + detail::min_encoded_bytes<Ts>());
  static void encode(writer& w, const std::tuple<Ts...>& t) {
    std::apply([&](const auto&... e) { (w.value(e), ...); }, t);
  }
  static std::tuple<Ts...> decode(reader& r) {
    // Braced initialization evaluates left to right.
    return std::tuple<Ts...>{r.value<Ts>()...};
  }
};

/// An owned object, or none: a move-only parameter or result travels as its value.
template <class T>
struct codec<std::unique_ptr<T>> {
  static constexpr std::size_t min_bytes = 1;  ///< its flag
  static void encode(writer& w, const std::unique_ptr<T>& p) {
    w.pod(static_cast<std::uint8_t>(p != nullptr));
    if (p) w.value(*p);
  }
  static std::unique_ptr<T> decode(reader& r) {
    auto has = r.pod<std::uint8_t>();
    if (has > 1) detail::throw_malformed("unique_ptr flag", 1, has);
    if (!has) return nullptr;
    return std::make_unique<T>(r.value<T>());
  }
};

template <class T>
struct codec<std::optional<T>> {
  static constexpr std::size_t min_bytes = 1;  ///< its flag
  static void encode(writer& w, const std::optional<T>& o) {
    w.pod(static_cast<std::uint8_t>(o.has_value()));
    if (o) w.value(*o);
  }
  static std::optional<T> decode(reader& r) {
    auto has = r.pod<std::uint8_t>();
    if (has > 1) detail::throw_malformed("optional flag", 1, has);
    if (!has) return std::nullopt;
    return r.value<T>();
  }
};

/// Null, the object (its first appearance in the message), or the number of an object already
/// written. Large ranges inside the object are referenced, not copied: do not change it until
/// the call that sends it has completed.
template <class T>
struct codec<std::shared_ptr<T>> {
  using object = std::remove_const_t<T>;
  enum : std::uint8_t { null = 0, first = 1, again = 2 };
  static constexpr std::size_t min_bytes = 1;  ///< its flag
  static void encode(writer& w, const std::shared_ptr<T>& p) {
    if (!p) return w.pod(std::uint8_t{null});
    auto [id, is_first] = w.shared_id(p);
    if (!is_first) {
      w.pod(std::uint8_t{again});
      return w.pod(id);
    }
    w.pod(std::uint8_t{first});
    w.with_owner(p, [&] { w.value(*p); });
  }
  static std::shared_ptr<T> decode(reader& r) {
    auto flag = r.pod<std::uint8_t>();
    if (flag == null) return nullptr;
    auto& table = r.shared().objects;
    if (flag == first) {
      auto at = table.size();
      table.emplace_back(&typeid(object), nullptr);  // numbered when it starts, as the writer does
      auto made = std::make_shared<object>(r.value<object>());
      table[at].second = made;
      return made;
    }
    if (flag != again) detail::throw_malformed("shared_ptr flag", again, flag);
    auto id = r.pod<std::uint32_t>();
    if (id >= table.size()) detail::throw_malformed("shared object number", table.size(), id);
    if (*table[id].first != typeid(object) || !table[id].second)
      throw error(errc::malformed_message, "a shared_ptr refers to an object of another type, or to one that contains it");
    return std::static_pointer_cast<object>(table[id].second);
  }
};

template <class... Ts>
struct codec<std::variant<Ts...>> {
  static constexpr std::size_t min_bytes = sizeof(std::uint32_t);  ///< its index
  static void encode(writer& w, const std::variant<Ts...>& v) {
    w.pod(static_cast<std::uint32_t>(v.index()));
    std::visit([&](const auto& e) { w.value(e); }, v);
  }
  static std::variant<Ts...> decode(reader& r) {
    auto i = r.pod<std::uint32_t>();
    if (i >= sizeof...(Ts)) detail::throw_malformed("variant index", sizeof...(Ts), i);
    return decode_at(r, i, std::index_sequence_for<Ts...>{});
  }

 private:
  template <std::size_t... I>
  static std::variant<Ts...> decode_at(reader& r, std::uint32_t i, std::index_sequence<I...>) {
    std::variant<Ts...> out;
    ((i == I ? (out.template emplace<I>(r.value<std::variant_alternative_t<I, std::variant<Ts...>>>()), 0) : 0), ...);
    return out;
  }
};

namespace detail {
template <class T>
struct is_std_array : std::false_type {};
template <class T, std::size_t N>
struct is_std_array<std::array<T, N>> : std::true_type {};
template <class T>
inline constexpr bool is_plain_aggregate_v = std::is_aggregate_v<T> && std::is_class_v<T> && !std::is_union_v<T> &&
                                             std::is_default_constructible_v<T> && !is_std_array<T>::value;
template <class F>
constexpr std::size_t min_field_bytes() {
  if constexpr (std::is_array_v<F>)
    return std::extent_v<F> * min_field_bytes<std::remove_extent_t<F>>();
  else
    return min_encoded_bytes<F>();
}
template <class Fields>
struct min_fields_bytes;
template <class... F>
struct min_fields_bytes<std::tuple<F...>> {
  static constexpr std::size_t value = (std::size_t{0} + ... + min_field_bytes<std::remove_cvref_t<F>>());
};
}

/// Plain aggregates: field by field; a C array member element by element.
template <class T>
struct codec<T, std::enable_if_t<detail::is_plain_aggregate_v<T> && !std::is_same_v<T, std::monostate>>> {
  static constexpr std::size_t min_bytes = detail::min_fields_bytes<decltype(detail::tie_fields(std::declval<T&>()))>::value;
  static void encode(writer& w, const T& v) {
    std::apply([&](const auto&... f) { (put(w, f), ...); }, detail::tie_fields(v));
  }
  static T decode(reader& r) {
    T v{};
    std::apply([&](auto&... f) { (take(r, f), ...); }, detail::tie_fields(v));
    return v;
  }

 private:
  template <class F>
  static void put(writer& w, const F& f) {
    if constexpr (std::is_array_v<F>)
      for (const auto& e : f) put(w, e);
    else
      w.value(f);
  }
  template <class F>
  static void take(reader& r, F& f) {
    if constexpr (std::is_array_v<F>)
      for (auto& e : f) take(r, e);
    else
      f = r.value<F>();
  }
};

/// @endcond

}  // namespace fiber
