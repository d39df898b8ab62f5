/// @file
/// Fiber::shared<T>: one large object made once and read by any number of
/// tasks, processes and maps, read-only everywhere.
///
///   auto theta = fiber::share(std::move(params));       // encoded once, here
///   co_await pool.starmap(&evaluate, tasks_holding(theta));  // each worker gets it once
///   double evaluate(const fiber::shared<std::vector<double>>& theta, std::uint64_t seed);
///
/// A pool sends the object to each worker once, however many items, chunks and maps hold it, and
/// while any of them may still run it keeps it there; when the last handle in the master goes,
/// its workers let it go. Workers on the master's host map the master's one copy in shared memory
/// instead of receiving their own. Elsewhere (a process's arguments, a queue, a result) a handle
/// carries its object with it. Copies of a handle are cheap: they share the object.
///
/// Each process decodes the object once into a value of its own. An array that every worker of a
/// host should read in place, without a copy each, is a shared<std::span<const X>>:
///   auto weights = fiber::share(std::span<const float>(model));  // elements copied in once
///   float probe(const fiber::shared<std::span<const float>>& w, std::size_t i) { return (*w)[i]; }
#pragma once
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "fiber/codec.hpp"
#include "fiber/detail/shared_entry.hpp"
#include "fiber/detail/export.hpp"

namespace fiber {

/// One large, read-only object made once in the master and read by any number of items and
/// workers: each worker gets it once, however many items hold it, and keeps it while in use.
template <class T>
class shared {
  static_assert(!std::is_reference_v<T> && !std::is_const_v<T>,
                "fiber: shared<T> takes the plain type of the object (shared<std::vector<double>>, not a reference "
                "or a const type); the object is read-only through it anyway");

 public:
  using element_type = T;  ///< the object's type

  /// Empty: holds nothing (reading it throws).
  shared() = default;
  /// Shares `value` (moved or copied in): encoded once, here; read-only from now on.
  explicit shared(T value)
    requires has_codec<T>
  {
    auto v = std::make_shared<const T>(std::move(value));
    writer w(v);  // large ranges reference the value, not copies
    w.value(*v);
    entry_ = detail::make_shared_entry(v, typeid(T), std::move(w));
    value_ = std::move(v);
  }
  /// shared<std::span<const X>>: the elements are copied in once, here; where the object is
  /// received, the span views them where they arrived (the host's shared memory, or the frames
  /// they came in): no process decodes a copy of its own.
  explicit shared(T value)
    requires detail::is_shared_view<T>::value
  {
    using element = typename T::value_type;
    auto owned = std::make_shared<const std::vector<element>>(value.begin(), value.end());
    writer w(owned);
    w.range(owned->data(), owned->size() * sizeof(element));
    entry_ = detail::make_shared_entry(nullptr, typeid(T), std::move(w));  // `w` keeps `owned`
    value_ = entry_->template value<T>();
  }

  const T& operator*() const { return *get(); }
  const T* operator->() const { return get().get(); }
  /// The object.
  const std::shared_ptr<const T>& get() const {
    if (!value_) throw error(errc::closed, "fiber::shared is empty: it was default-constructed or moved from");
    return value_;
  }
  explicit operator bool() const noexcept { return entry_ != nullptr; }
  /// What the object costs each time it travels.
  std::size_t bytes() const noexcept { return entry_ ? entry_->bytes() : 0; }

  /// The entry behind it (what a codec sends).
  const std::shared_ptr<const detail::shared_entry>& entry() const noexcept { return entry_; }
  /// A handle of a received entry: its value is decoded now (once per process: later handles
  /// of the entry share it), so that reading it is a plain pointer's read.
  static shared from_entry(const std::shared_ptr<const detail::shared_entry>& e) {
    shared s;
    s.value_ = e->template value<T>();
    s.entry_ = e;
    return s;
  }

 private:
  std::shared_ptr<const detail::shared_entry> entry_;
  std::shared_ptr<const T> value_;
};

/// Shares `value`: `fiber::share(std::move(v))` moves it in, `fiber::share(v)` copies it.
template <class T>
shared<std::remove_cvref_t<T>> share(T&& value) {
  static_assert(has_codec<std::remove_cvref_t<T>> || detail::is_shared_view<std::remove_cvref_t<T>>::value,
                FIBER_NO_CODEC_MESSAGE);
  return shared<std::remove_cvref_t<T>>(std::forward<T>(value));
}

namespace detail {
/// A shared object's encoding, whole, in a message of its own kind (the inline form).
FIBER_API void write_shared_inline(writer& w, const shared_entry& e);
FIBER_API std::shared_ptr<const shared_entry> read_shared_inline(reader& r, std::uint64_t id, std::uint64_t type);
}  // namespace detail

/// By reference (its id only) where the writer sends shared objects apart (a pool's chunks: the
/// pool attaches the object for each worker that lacks it), else the object itself.
/// @cond internal
template <class T>
struct codec<shared<T>> {
  enum : std::uint8_t { empty = 0, by_reference = 1, whole = 2 };
  static void encode(writer& w, const shared<T>& s) {
    auto& e = s.entry();
    if (!e) return w.pod(std::uint8_t{empty});
    bool apart = w.sends_shared_apart();
    w.pod(std::uint8_t{apart ? by_reference : whole});
    w.pod(e->id());
    w.pod(e->type());
    if (apart)
      w.attach_shared(e);
    else
      detail::write_shared_inline(w, *e);
  }
  static shared<T> decode(reader& r) {
    auto how = r.pod<std::uint8_t>();
    if (how == empty) return shared<T>();
    if (how != by_reference && how != whole) detail::throw_malformed("shared flag", whole, how);
    auto id = r.pod<std::uint64_t>();
    auto type = r.pod<std::uint64_t>();
    if (type != detail::type_fingerprint(typeid(T))) detail::throw_shared_type_mismatch(id, typeid(T));
    if (how == whole) return shared<T>::from_entry(detail::read_shared_inline(r, id, type));
    auto e = detail::find_shared(id);
    if (!e)
      throw error(errc::malformed_message, "shared object " + std::to_string(id) +
                                               " was referred to but never sent to this process (sender and receiver disagree)");
    return shared<T>::from_entry(std::move(e));
  }
};
/// @endcond

}  // namespace fiber
