/// @file
/// The writer and reader a codec works with, and the customization point
/// itself (`fiber::codec<T>`, declared here; the standard types' codecs are in fiber/codec.hpp,
/// which is the header to include).
///
/// Small data goes inline into the message's head; large contiguous ranges of trivially copyable
/// values travel as frames of their own (blobs), not copied. A shared_ptr's object is written once
/// per writer and referred to by number after that.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fiber/error.hpp"
#include "fiber/detail/export.hpp"

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
/// What a type without a codec fails to compile with, in place of pages about an incomplete type.
#define FIBER_NO_CODEC_MESSAGE                                                                            \
  "fiber: this type cannot travel between processes (as an argument, a result or a message): it has no " \
  "fiber::codec<T> (T is named in the 'In instantiation of' line above). Make it a plain aggregate of "  \
  "encodable fields (no constructors of its own), or specialize fiber::codec<T> with static void "       \
  "encode(fiber::writer&, const T&) and static T decode(fiber::reader&) (docs/getting_started.md, rule 3)"

namespace detail {
class shared_entry;  ///< fiber/detail/shared_entry.hpp
/// A frame of an encoded message: bytes plus, optionally, what keeps them alive (zero-copy).
struct blob {
  const std::byte* data = nullptr;
  std::size_t size = 0;
  std::shared_ptr<const void> keep;  ///< owns `data`
};
/// Contiguous ranges at least this large go as their own frame.
inline constexpr std::size_t blob_threshold = std::size_t{8} * 1024;
/// Marks a range's length when the range is one written before (writer::share_ranges).
inline constexpr std::uint64_t range_ref_bit = std::uint64_t(1) << 63;
/// Marks a range's length when the range's bytes travel apart, as a shared object of their own
/// (writer::referenced); its id follows.
inline constexpr std::uint64_t range_entry_bit = std::uint64_t(1) << 62;
[[noreturn]] FIBER_API void throw_malformed(const char* what, std::size_t need, std::size_t have);
/// What a pool gives its chunks' writers: the shared object that carries a large range an item
/// holds by reference, made once per call however many items and chunks hold it.
class range_sharer {
 public:
  virtual ~range_sharer() = default;
  /// Null: the range is written in the message after all (too small to be worth it).
  virtual std::shared_ptr<const shared_entry> share(const void* p, std::size_t n) = 0;
};
/// The bytes of the range that travelled as shared object `id` (a reader's range_entry_bit):
/// this process holds it for its master; throws malformed_message when it does not.
FIBER_API std::span<const std::byte> shared_range(std::uint64_t id, std::size_t n);
/// The type a range's shared object is made with and checked against.
struct shared_range_tag {};
}  // namespace detail

/// Appends an encoded value: small data inline, large contiguous data as separate frames.
class FIBER_API writer {
 public:
  writer() = default;
  /// Large ranges reference memory owned by `keep` instead of being copied. Without an owner,
  /// a large range is copied once, when it is written.
  explicit writer(std::shared_ptr<const void> keep) : keep_(std::move(keep)) {}
  /// Everything inline, however large: one flat string (values stored by a manager's server).
  struct flat_t {};
  static constexpr flat_t flat{};  ///< the tag that asks for a flat writer
  /// A writer that keeps everything inline (see flat_t).
  explicit writer(flat_t) : flat_(true) {}

  /// `n` raw bytes, inline.
  void bytes(const void* p, std::size_t n) {
    auto* b = static_cast<const char*>(p);
    head_.append(b, n);
  }
  /// A trivially copyable value, its bytes inline.
  template <class T>
  void pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes(&v, sizeof v);
  }
  /// A count or a length, as 8 bytes.
  void size(std::size_t n) { pod(static_cast<std::uint64_t>(n)); }
  /// A contiguous range: inline when small, its own frame when large.
  void range(const void* p, std::size_t n) {
    if (n < detail::blob_threshold || flat_) {
      size(n);
      bytes(p, n);
      return;
    }
    if (referenced_ && sharer_) return write_apart(p, n);
    if (share_ranges_ && refer_to_earlier(p, n)) return;
    size(n);
    if (share_ranges_) ranges_[p] = {n, static_cast<std::uint32_t>(blobs_.size() - ranges_base_)};
    if (keep_) {
      blobs_.push_back({static_cast<const std::byte*>(p), n, keep_});  // zero-copy: the owner lives on
      return;
    }
    // Nobody keeps the value alive (it may be a temporary): take a copy now.
    auto copy = std::make_shared<std::vector<std::byte>>(static_cast<const std::byte*>(p),
                                                         static_cast<const std::byte*>(p) + n);
    blobs_.push_back({copy->data(), n, copy});
  }
  /// Any value with a codec: what a codec of a compound type calls for each part.
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
  std::pair<std::uint32_t, bool> shared_id(const std::shared_ptr<const void>& p) {
    auto key = p.get();
    auto [it, first] = shared_ids_.try_emplace(key, static_cast<std::uint32_t>(shared_ids_.size()), p);
    return {it->second.first, first};
  }
  /// Starts a new scope of shared objects: what comes next is read by a reader of its own.
  void forget_shared() noexcept {
    shared_ids_.clear();
    ranges_.clear();
    ranges_base_ = blobs_.size();
  }
  /// Whether what was written refers to an object by number (a shared_ptr seen twice or more, a
  /// large range written again).
  bool shares_objects() const noexcept { return !shared_ids_.empty() || ranges_referenced_; }
  /// From now on, a large range with the address and the bytes of one written before (since
  /// the last forget_shared) travels once: the later ones refer to it by number, as pickle's memo
  /// does for an object several items hold. This is what carries a vector that every item of a
  /// pool chunk holds by reference once per chunk. Off unless asked: each reader of what this
  /// writes must read its large ranges in order into one table (reader::share_objects), as a
  /// pool worker reads a chunk's items.
  void share_ranges() noexcept { share_ranges_ = true; }
  /// From now on, a fiber::shared<T> is written as its id, and its object is attached to this
  /// writer (shared_attached) for the sender to deliver apart: a pool sends each worker an object
  /// once, whatever chunk holds it. Off unless asked: otherwise the object travels inside.
  void send_shared_apart() noexcept { shared_apart_ = true; }
  /// From now on, a large range written inside referenced() travels as a shared object of its
  /// own that `sharer` makes (once per call): a pool sends it to each worker once, as a
  /// fiber::shared. Each reader of what this writes must hold those objects (a pool worker does).
  void share_referenced_ranges(detail::range_sharer* sharer) noexcept { sharer_ = sharer; }
  /// Runs `f`, which writes an object the caller holds by reference (an item's
  /// std::reference_wrapper): its large ranges are what many items may hold.
  template <class F>
  void referenced(F&& f) {
    auto outer = std::exchange(referenced_, true);
    try {
      f();
    } catch (...) {
      referenced_ = outer;
      throw;
    }
    referenced_ = outer;
  }
  /// @cond internal
  bool sends_shared_apart() const noexcept { return shared_apart_; }
  void attach_shared(const std::shared_ptr<const detail::shared_entry>& e) {
    for (auto& a : attached_)
      if (a == e) return;
    attached_.push_back(e);
  }
  /// @endcond
  /// The objects attached, each once, in the order first written.
  const std::vector<std::shared_ptr<const detail::shared_entry>>& shared_attached() const noexcept { return attached_; }

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

  /// The inline bytes written: the message's first frame.
  std::string& head() noexcept { return head_; }
  /// The large ranges, each a frame of its own after the head.
  std::vector<detail::blob>& blobs() noexcept { return blobs_; }
  /// The inline bytes written: the message's first frame.
  const std::string& head() const noexcept { return head_; }
  /// The large ranges, each a frame of its own after the head.
  const std::vector<detail::blob>& blobs() const noexcept { return blobs_; }
  /// The head's and the ranges' bytes together.
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

  /// A repeated large range: its length with the top bit set, then the number of the first.
  bool refer_to_earlier(const void* p, std::size_t n) {
    auto it = ranges_.find(p);
    if (it == ranges_.end() || it->second.first != n) return false;
    // The same address may hold other bytes by now (a codec's temporary freed and another put
    // there): only the same bytes are referred to. Memory referenced, not copied, is the same.
    auto& first = blobs_[ranges_base_ + it->second.second];
    if (first.data != p && std::memcmp(first.data, p, n) != 0) return false;
    pod(static_cast<std::uint64_t>(n) | detail::range_ref_bit);
    pod(it->second.second);
    ranges_referenced_ = true;
    return true;
  }
  /// A range inside referenced(), sent apart: its length marked, then its object's id.
  void write_apart(const void* p, std::size_t n);
  bool share_ranges_ = false;
  bool referenced_ = false;
  detail::range_sharer* sharer_ = nullptr;
  bool ranges_referenced_ = false;
  bool shared_apart_ = false;
  std::vector<std::shared_ptr<const detail::shared_entry>> attached_;
  std::size_t ranges_base_ = 0;  ///< blobs_ written before the last forget_shared
  std::unordered_map<const void*, std::pair<std::size_t, std::uint32_t>> ranges_;  ///< address -> length, number
};

/// The objects shared_ptrs in a message decoded to, by number (codec<shared_ptr>); several
/// readers of one message's parts (a pool chunk's items) may share one.
struct shared_objects {
  std::vector<std::pair<const std::type_info*, std::shared_ptr<void>>> objects;  ///< by number, with their types
  std::vector<std::span<const std::byte>> ranges;  ///< the large ranges read, in order
};

/// Reads an encoded value back; every read is bounds-checked and throws
/// `fiber::error(errc::malformed_message)` on truncated or inconsistent input.
class FIBER_API reader {
 public:
  /// Reads a message: its inline `head` and its large-range frames `blobs` (what a writer made).
  reader(std::span<const std::byte> head, std::span<const std::span<const std::byte>> blobs)
      : head_(head), blobs_(blobs) {}
  /// Reads what a flat writer wrote.
  reader(writer::flat_t, std::span<const std::byte> flat) : head_(flat), flat_(true) {}
  /// Decodes shared_ptrs into `table`, which outlives this reader (the items of a pool chunk,
  /// read one after the other, share one).
  void share_objects(shared_objects& table) noexcept {
    shared_ = &table;
    ranges_in_table_ = true;
  }
  /// The table shared_ptrs decode into (this reader's own unless share_objects gave one).
  shared_objects& shared() {
    if (!shared_) {
      own_shared_ = std::make_shared<shared_objects>();
      shared_ = own_shared_.get();
    }
    return *shared_;
  }

  /// `n` raw inline bytes into `out`.
  void bytes(void* out, std::size_t n) {
    if (n > head_.size() - pos_) detail::throw_malformed("inline data", n, head_.size() - pos_);
    if (n) std::memcpy(out, head_.data() + pos_, n);
    pos_ += n;
  }
  /// A trivially copyable value from its inline bytes.
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
    auto raw = pod<std::uint64_t>();
    if (raw & detail::range_entry_bit && !(raw & detail::range_ref_bit)) {  // sent apart (writer::referenced)
      auto n = static_cast<std::size_t>(raw & ~detail::range_entry_bit);
      return detail::shared_range(pod<std::uint64_t>(), n);
    }
    if (raw & detail::range_ref_bit) {  // one read before (writer::share_ranges)
      auto n = static_cast<std::size_t>(raw & ~detail::range_ref_bit);
      auto id = pod<std::uint32_t>();
      // Numbered across the readers of a table, or, read alone, this message's frames so far.
      std::span<const std::span<const std::byte>> earlier =
          ranges_in_table_ ? std::span<const std::span<const std::byte>>(shared_->ranges) : blobs_.first(next_blob_);
      if (id >= earlier.size()) detail::throw_malformed("repeated range number", id + std::size_t(1), earlier.size());
      if (earlier[id].size() != n) detail::throw_malformed("repeated range size", n, earlier[id].size());
      return earlier[id];
    }
    auto n = static_cast<std::size_t>(raw);
    if (n < detail::blob_threshold || flat_) {
      if (n > head_.size() - pos_) detail::throw_malformed("inline range", n, head_.size() - pos_);
      std::span<const std::byte> s{head_.data() + pos_, n};
      pos_ += n;
      return s;
    }
    if (next_blob_ >= blobs_.size()) detail::throw_malformed("large-data frame", 1, 0);
    auto s = blobs_[next_blob_++];
    if (s.size() != n) detail::throw_malformed("large-data frame size", n, s.size());
    if (ranges_in_table_) shared_->ranges.push_back(s);  // a later item may refer to it
    return s;
  }
  /// Any value with a codec: what a codec of a compound type calls for each part.
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
  /// True when everything was read: the inline bytes and every frame.
  bool at_end() const noexcept { return pos_ == head_.size() && next_blob_ == blobs_.size(); }

 private:
  std::span<const std::byte> head_;
  std::span<const std::span<const std::byte>> blobs_;
  std::size_t pos_ = 0;
  std::size_t next_blob_ = 0;
  bool flat_ = false;
  shared_objects* shared_ = nullptr;
  std::shared_ptr<shared_objects> own_shared_;  ///< when nobody shared a table with this reader
  bool ranges_in_table_ = false;                 ///< share_objects: large ranges are numbered there
};

/// `v` as one flat string, and back (throws malformed_message on trailing bytes).
template <class T>
std::string encode_flat(const T& v) {
  writer w(writer::flat);
  w.value(v);
  return std::move(w.head());
}
/// The value encode_flat() made.
template <class T>
T decode_flat(std::string_view s) {
  reader r(writer::flat, {reinterpret_cast<const std::byte*>(s.data()), s.size()});
  T v = r.value<T>();
  if (!r.at_end()) throw error(errc::malformed_message, "stored value carries trailing bytes: it was stored with another type");
  return v;
}

}  // namespace fiber
