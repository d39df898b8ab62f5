// One object behind fiber::shared<T>, as it travels: its id, its type's fingerprint, and its
// encoding (a head and large frames). Where it was shared, the encoding references the value's
// own memory; where it was received, it references the frames or the host's shared memory it
// came in. The value is decoded from it once per process, when first read.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "fiber/encoding.hpp"
#include "fiber/error.hpp"
#include "fiber/detail/export.hpp"

namespace fiber::detail {

/// fiber::shared<std::span<const X>> (X trivially copyable): the elements are read where they
/// lie (the frames they came in, or the host's shared memory), never decoded into a copy.
template <class T>
struct is_shared_view : std::false_type {};
template <class X>
struct is_shared_view<std::span<const X>> : std::bool_constant<std::is_trivially_copyable_v<X>> {};

/// What tells two types apart on the wire: a hash of the type's name (the same in every process
/// of one program, which is what runs on both sides).
FIBER_API std::uint64_t type_fingerprint(const std::type_info& t) noexcept;

class FIBER_API shared_entry {
 public:
  /// Where the object was shared: `value` encoded by `encoded` (its large ranges referencing
  /// `value`'s memory).
  shared_entry(std::shared_ptr<const void> value, const std::type_info& type, writer&& encoded);
  /// Where it was received: a head and large frames that `keep` keeps alive.
  shared_entry(std::uint64_t id, std::uint64_t type, std::string head, std::vector<std::span<const std::byte>> blobs,
               std::shared_ptr<const void> keep);
  ~shared_entry();
  shared_entry(const shared_entry&) = delete;
  shared_entry& operator=(const shared_entry&) = delete;

  std::uint64_t id() const noexcept { return id_; }
  std::uint64_t type() const noexcept { return type_; }
  /// The encoding's size: what one copy of it costs on the wire or in memory.
  std::size_t bytes() const noexcept;
  std::span<const std::byte> head() const noexcept { return {reinterpret_cast<const std::byte*>(head_.data()), head_.size()}; }
  std::span<const std::span<const std::byte>> blobs() const noexcept { return blobs_; }
  /// What keeps the large frames alive (for zero-copy sends).
  const std::shared_ptr<const void>& keep() const noexcept { return keep_; }

  /// The value, decoded on the first call in this process; the same object after that.
  template <class T>
  std::shared_ptr<const T> value() const;

  /// The encoding copied into this host's shared memory, once (a sealed memfd): the descriptor
  /// stays open while this entry lives, and other processes of this host map it through
  /// /proc/<pid>/fd/<fd>. On the side that shared the object only.
  int host_copy() const;
  bool has_host_copy() const {
    std::lock_guard lock(mutex_);
    return host_fd_ >= 0;
  }
  /// Where the head and each frame lie in the host copy: 64-byte aligned, in order.
  static std::vector<std::size_t> host_layout(std::size_t head, std::span<const std::size_t> blobs);

  /// Runs `f(id)` when this entry goes away (on whatever thread drops it last): how the pools
  /// that sent it tell their workers to let it go.
  void on_release(std::function<void(std::uint64_t)> f) const;

 private:
  std::uint64_t id_;
  std::uint64_t type_;
  std::string head_;
  std::vector<std::span<const std::byte>> blobs_;
  std::shared_ptr<const void> keep_;
  bool made_here_ = false;
  friend void publish_shared(const shared_entry&, std::uint64_t);
  mutable bool published_ = false;  // counted by publish_shared
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const void> value_;  // decoded, or the value shared here
  mutable int host_fd_ = -1;
  mutable std::vector<std::function<void(std::uint64_t)>> on_release_;

  template <class T>
  std::shared_ptr<const T> view_of(std::span<const std::byte> bytes) const;
};

/// An entry for `value`, shared here (found by id in this process while it lives).
FIBER_API std::shared_ptr<const shared_entry> make_shared_entry(std::shared_ptr<const void> value, const std::type_info& type,
                                                      writer&& encoded);
/// A host copy made by process `pid` (shared_entry::host_copy, descriptor `fd`), mapped here.
FIBER_API std::shared_ptr<const shared_entry> map_host_copy(int pid, int fd, std::uint64_t id, std::uint64_t type,
                                                  std::size_t head, std::span<const std::size_t> blobs);

/// Counts `e` (once) among the objects sent apart that are in use, until it goes; throws
/// shared_cache_full, naming the key, when they would pass `bound` bytes (0: a quarter of this
/// host's memory).
FIBER_API void publish_shared(const shared_entry& e, std::uint64_t bound);
/// The bytes of the objects published and still in use in this process.
FIBER_API std::uint64_t shared_published_bytes() noexcept;

/// The entries this process received by reference (a pool worker's), kept until the master
/// releases them, plus the live ones it made itself.
FIBER_API void hold_shared(std::shared_ptr<const shared_entry> e);
FIBER_API void release_shared(std::uint64_t id) noexcept;
FIBER_API std::shared_ptr<const shared_entry> find_shared(std::uint64_t id);
/// How many entries this process holds for its master (a worker's cache).
FIBER_API std::size_t shared_held() noexcept;
[[noreturn]] FIBER_API void throw_shared_type_mismatch(std::uint64_t id, const std::type_info& wanted);

// ---- implementation

template <class T>
std::shared_ptr<const T> shared_entry::value() const {
  std::lock_guard lock(mutex_);
  if (type_ != type_fingerprint(typeid(T))) throw_shared_type_mismatch(id_, typeid(T));
  if (!value_) {
    reader r(head(), blobs_);
    std::shared_ptr<const T> v;
    if constexpr (is_shared_view<T>::value)
      v = view_of<T>(r.range());
    else
      v = std::make_shared<const T>(r.value<T>());
    if (!r.at_end())
      throw error(errc::malformed_message, "shared object " + std::to_string(id_) + " carries trailing bytes: it was shared with another type");
    value_ = std::move(v);
  }
  return std::static_pointer_cast<const T>(value_);
}

template <class T>
std::shared_ptr<const T> shared_entry::view_of(std::span<const std::byte> bytes) const {
  using element = typename T::value_type;
  if (bytes.size() % sizeof(element))
    throw error(errc::malformed_message, "shared object " + std::to_string(id_) + ": its bytes are not whole elements");
  struct holder {
    std::shared_ptr<const void> keep;
    T view;
  };
  auto h = std::make_shared<holder>();
  if (reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(element) == 0) {
    h->keep = keep_;  // the elements stay where they arrived: in the frames, or the host's memory
  } else {
    // Inline in the head (a small array), or a frame a transport placed unaligned: one copy.
    auto copy = std::make_shared<std::vector<element>>(bytes.size() / sizeof(element));
    if (!bytes.empty()) std::memcpy(copy->data(), bytes.data(), bytes.size());
    bytes = std::as_bytes(std::span<const element>(*copy));
    h->keep = std::move(copy);
  }
  h->view = T(reinterpret_cast<const element*>(bytes.data()), bytes.size() / sizeof(element));
  return std::shared_ptr<const T>(h, &h->view);
}

}  // namespace fiber::detail
