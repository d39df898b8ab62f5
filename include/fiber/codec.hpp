// fiber/codec.hpp - how values travel between processes.
//
// `fiber::codec<T>` is the customization point: specialize it with
//   static void encode(fiber::writer&, const T&);
//   static T decode(fiber::reader&);
// The defaults cover arithmetic and enum types, strings, the standard containers, pair, tuple,
// optional, variant, shared_ptr and plain aggregates (through Boost.PFR). Large contiguous
// ranges of trivially copyable values travel as frames of their own, not copied into the header
// frame. A shared_ptr keeps its sharing within one message, as pickle's memo does: an object
// several values point to travels once (and, in a pool, once per chunk of items).
#pragma once
#include <array>
#include <boost/pfr.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "fiber/error.hpp"

namespace fiber {

template <class T, class Enable = void>
struct codec;

/// True when fiber knows how to encode T: a `fiber::codec<T>` exists (built in, a plain
/// aggregate's, or a specialization of the user's).
template <class T>
concept has_codec = requires { sizeof(codec<std::remove_cvref_t<T>>); };

namespace detail {
template <class T>
inline constexpr bool no_codec_for = false;
}  // namespace detail
// What a type without a codec fails to compile with, in place of pages about an incomplete type.
#define FIBER_NO_CODEC_MESSAGE                                                                            \
  "fiber: this type cannot travel between processes (as an argument, a result or a message): it has no " \
  "fiber::codec<T> (T is named in the 'In instantiation of' line above). Make it a plain aggregate of "  \
  "encodable fields (no constructors of its own), or specialize fiber::codec<T> with static void "       \
  "encode(fiber::writer&, const T&) and static T decode(fiber::reader&) (docs/getting_started.md, rule 3)"

namespace detail {
/// A frame of an encoded message: bytes plus, optionally, what keeps them alive (zero-copy).
struct blob {
  const std::byte* data = nullptr;
  std::size_t size = 0;
  std::shared_ptr<const void> keep;  // owns `data`
};
/// Contiguous ranges at least this large go as their own frame.
inline constexpr std::size_t blob_threshold = 8 * 1024;
[[noreturn]] void throw_malformed(const char* what, std::size_t need, std::size_t have);
}  // namespace detail

/// Appends an encoded value: small data inline, large contiguous data as separate frames.
class writer {
 public:
  writer() = default;
  /// Large ranges reference memory owned by `keep` instead of being copied. Without an owner,
  /// a large range is copied once, when it is written.
  explicit writer(std::shared_ptr<const void> keep) : keep_(std::move(keep)) {}
  /// Everything inline, however large: one flat string (values stored by a manager's server).
  struct flat_t {};
  static constexpr flat_t flat{};
  explicit writer(flat_t) : flat_(true) {}

  void bytes(const void* p, std::size_t n) {
    auto* b = static_cast<const char*>(p);
    head_.append(b, n);
  }
  template <class T>
  void pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes(&v, sizeof v);
  }
  void size(std::size_t n) { pod(static_cast<std::uint64_t>(n)); }
  /// A contiguous range: inline when small, its own frame when large.
  void range(const void* p, std::size_t n) {
    size(n);
    if (n < detail::blob_threshold || flat_) {
      bytes(p, n);
      return;
    }
    if (keep_) {
      blobs_.push_back({static_cast<const std::byte*>(p), n, keep_});  // zero-copy: the owner lives on
      return;
    }
    // Nobody keeps the value alive (it may be a temporary): take a copy now.
    auto copy = std::make_shared<std::vector<std::byte>>(static_cast<const std::byte*>(p),
                                                         static_cast<const std::byte*>(p) + n);
    blobs_.push_back({copy->data(), n, copy});
  }
  template <class T>
  void value(const T& v) {
    if constexpr (has_codec<T>)
      codec<std::remove_cvref_t<T>>::encode(*this, v);
    else
      static_assert(detail::no_codec_for<T>, FIBER_NO_CODEC_MESSAGE);
  }

  /// codec<shared_ptr>: the number of the object `p` points to in this writer, and whether this
  /// is its first appearance (numbers count first appearances from 0). The writer keeps the
  /// object alive, so no other object can take its address while the number stands.
  std::pair<std::uint32_t, bool> shared_id(std::shared_ptr<const void> p) {
    auto key = p.get();
    auto [it, first] = shared_ids_.try_emplace(key, static_cast<std::uint32_t>(shared_ids_.size()), std::move(p));
    return {it->second.first, first};
  }
  /// Starts a new scope of shared objects: what comes next is read by a reader of its own.
  void forget_shared() noexcept { shared_ids_.clear(); }
  /// Runs `f` with `owner` keeping large ranges alive: a shared object's data is referenced, not
  /// copied.
  template <class F>
  void with_owner(std::shared_ptr<const void> owner, F&& f) {
    if (flat_) return f();
    auto outer = std::exchange(keep_, std::move(owner));
    try {
      f();
    } catch (...) {
      keep_ = std::move(outer);
      throw;
    }
    keep_ = std::move(outer);
  }

  std::string& head() noexcept { return head_; }
  std::vector<detail::blob>& blobs() noexcept { return blobs_; }
  const std::string& head() const noexcept { return head_; }
  const std::vector<detail::blob>& blobs() const noexcept { return blobs_; }
  std::size_t total_size() const noexcept {
    std::size_t n = head_.size();
    for (auto& b : blobs_) n += b.size;
    return n;
  }

 private:
  std::string head_;
  std::vector<detail::blob> blobs_;
  std::shared_ptr<const void> keep_;
  std::unordered_map<const void*, std::pair<std::uint32_t, std::shared_ptr<const void>>> shared_ids_;
  bool flat_ = false;
};

/// The objects shared_ptrs in a message decoded to, by number (codec<shared_ptr>); several
/// readers of one message's parts (a pool chunk's items) may share one.
struct shared_objects {
  std::vector<std::pair<const std::type_info*, std::shared_ptr<void>>> objects;
};

/// Reads an encoded value back; every read is bounds-checked and throws
/// `fiber::error(errc::malformed_message)` on truncated or inconsistent input.
class reader {
 public:
  reader(std::span<const std::byte> head, std::span<const std::span<const std::byte>> blobs)
      : head_(head), blobs_(blobs) {}
  /// Reads what a flat writer wrote.
  reader(writer::flat_t, std::span<const std::byte> flat) : head_(flat), flat_(true) {}
  /// Decodes shared_ptrs into `table`, which outlives this reader (the items of a pool chunk,
  /// read one after the other, share one).
  void share_objects(shared_objects& table) noexcept { shared_ = &table; }
  shared_objects& shared() {
    if (!shared_) {
      own_shared_ = std::make_shared<shared_objects>();
      shared_ = own_shared_.get();
    }
    return *shared_;
  }

  void bytes(void* out, std::size_t n) {
    if (n > head_.size() - pos_) detail::throw_malformed("inline data", n, head_.size() - pos_);
    if (n) std::memcpy(out, head_.data() + pos_, n);
    pos_ += n;
  }
  template <class T>
  T pod() {
    T v;
    bytes(&v, sizeof v);
    return v;
  }
  /// A count of elements that each take at least `min_element_bytes` of input.
  std::size_t size(std::size_t min_element_bytes = 1) {
    auto n = pod<std::uint64_t>();
    // Reject counts the remaining input cannot hold before allocating anything.
    std::size_t left = remaining();
    if (min_element_bytes && n > left / min_element_bytes)
      detail::throw_malformed("element count", static_cast<std::size_t>(n), left);
    return static_cast<std::size_t>(n);
  }
  /// A contiguous range written by writer::range.
  std::span<const std::byte> range() {
    auto n = static_cast<std::size_t>(pod<std::uint64_t>());
    if (n < detail::blob_threshold || flat_) {
      if (n > head_.size() - pos_) detail::throw_malformed("inline range", n, head_.size() - pos_);
      std::span<const std::byte> s{head_.data() + pos_, n};
      pos_ += n;
      return s;
    }
    if (next_blob_ >= blobs_.size()) detail::throw_malformed("large-data frame", 1, 0);
    auto s = blobs_[next_blob_++];
    if (s.size() != n) detail::throw_malformed("large-data frame size", n, s.size());
    return s;
  }
  template <class T>
  T value() {
    if constexpr (has_codec<T>) {
      return codec<std::remove_cvref_t<T>>::decode(*this);
    } else {
      static_assert(detail::no_codec_for<T>, FIBER_NO_CODEC_MESSAGE);
      std::terminate();
    }
  }
  /// Bytes left inline plus in unread frames.
  std::size_t remaining() const noexcept {
    std::size_t n = head_.size() - pos_;
    for (std::size_t i = next_blob_; i < blobs_.size(); ++i) n += blobs_[i].size();
    return n;
  }
  bool at_end() const noexcept { return pos_ == head_.size() && next_blob_ == blobs_.size(); }

 private:
  std::span<const std::byte> head_;
  std::span<const std::span<const std::byte>> blobs_;
  std::size_t pos_ = 0;
  std::size_t next_blob_ = 0;
  bool flat_ = false;
  shared_objects* shared_ = nullptr;
  std::shared_ptr<shared_objects> own_shared_;  // when nobody shared a table with this reader
};

/// `v` as one flat string, and back (throws malformed_message on trailing bytes).
template <class T>
std::string encode_flat(const T& v) {
  writer w(writer::flat);
  w.value(v);
  return std::move(w.head());
}
template <class T>
T decode_flat(std::string_view s) {
  reader r(writer::flat, {reinterpret_cast<const std::byte*>(s.data()), s.size()});
  T v = r.value<T>();
  if (!r.at_end()) throw error(errc::malformed_message, "stored value carries trailing bytes: it was stored with another type");
  return v;
}

// ---- defaults -------------------------------------------------------------------------------

template <class T>
struct codec<T, std::enable_if_t<(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) || std::is_enum_v<T>>> {
  static void encode(writer& w, const T& v) { w.pod(v); }
  static T decode(reader& r) { return r.pod<T>(); }
};

/// One byte, 0 or 1: any other byte is malformed (a bool holding it would be undefined behaviour).
template <>
struct codec<bool> {
  static void encode(writer& w, bool v) { w.pod(static_cast<std::uint8_t>(v)); }
  static bool decode(reader& r) {
    auto b = r.pod<std::uint8_t>();
    if (b > 1) detail::throw_malformed("bool", 1, b);
    return b == 1;
  }
};

template <>
struct codec<std::string> {
  static void encode(writer& w, const std::string& s) { w.range(s.data(), s.size()); }
  static std::string decode(reader& r) {
    auto s = r.range();
    return {reinterpret_cast<const char*>(s.data()), s.size()};
  }
};

template <>
struct codec<std::monostate> {
  static void encode(writer&, const std::monostate&) {}
  static std::monostate decode(reader&) { return {}; }
};

template <class T, class A>
struct codec<std::vector<T, A>> {
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
      auto n = r.size(1);
      v.reserve(n);
      for (std::size_t i = 0; i < n; ++i) v.push_back(r.value<T>());
    }
    return v;
  }
};

template <class T, std::size_t N>
struct codec<std::array<T, N>> {
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
  static void encode(writer& w, const M& m) {
    w.size(m.size());
    for (auto& [k, v] : m) {
      w.value(k);
      w.value(v);
    }
  }
  static M decode(reader& r) {
    M m;
    auto n = r.size(1);
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
  static void encode(writer& w, const std::set<K, C, A>& s) {
    w.size(s.size());
    for (auto& k : s) w.value(k);
  }
  static std::set<K, C, A> decode(reader& r) {
    std::set<K, C, A> s;
    auto n = r.size(1);
    for (std::size_t i = 0; i < n; ++i) s.insert(r.value<K>());
    return s;
  }
};

template <class A, class B>
struct codec<std::pair<A, B>> {
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
}

/// Plain aggregates: field by field.
template <class T>
struct codec<T, std::enable_if_t<detail::is_plain_aggregate_v<T> && !std::is_same_v<T, std::monostate>>> {
  static void encode(writer& w, const T& v) {
    boost::pfr::for_each_field(v, [&](const auto& f) { w.value(f); });
  }
  static T decode(reader& r) {
    T v{};
    boost::pfr::for_each_field(v, [&](auto& f) { f = r.value<std::remove_cvref_t<decltype(f)>>(); });
    return v;
  }
};

}  // namespace fiber
