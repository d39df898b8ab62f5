// The pool's packed items, written and read in this one place: a chunk of a pool's work travels
// as one frame of items, each [u32 inline bytes][u32 large frames][inline bytes], followed by the
// large ranges of all its items as frames of their own, in order (writer::blobs). A result item
// starts with a status byte (item_status). Both sides are inline: they run once per item.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "fiber/codec.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

/// Appends the items of a chunk (a sink's arguments, a worker's results).
class item_writer {
 public:
  explicit item_writer(writer& chunk) : chunk_(chunk) {}
  template <class Encode>
  void add(Encode&& encode) {
    auto& head = chunk_.head();
    auto at = head.size();
    head.append(8, '\0');  // filled in below, once the item's size is known
    auto blobs_before = chunk_.blobs().size();
    encode(chunk_);
    auto bytes = static_cast<std::uint32_t>(head.size() - at - 8);
    auto blobs = static_cast<std::uint32_t>(chunk_.blobs().size() - blobs_before);
    std::memcpy(&head[at], &bytes, 4);
    std::memcpy(&head[at + 4], &blobs, 4);
  }

 private:
  writer& chunk_;
};

enum item_status : char { item_value = 0, item_raised = 1, item_failed = 2 };

struct packed_item {
  std::uint8_t status = 0;
  std::span<const std::byte> head;
  std::vector<std::span<const std::byte>> blobs;
};

/// Reads `count` packed items from frame `at` of `frames` (each frame has data() and size(); the
/// large frames follow it). Bounds-checked: bytes that do not hold `count` items fail with
/// errc::malformed_message, and a count the frame cannot hold is refused before anything is
/// allocated for it.
template <class Frames>
std::vector<packed_item> unpack(const Frames& frames, std::size_t at, std::size_t count, bool with_status) {
  if (at >= frames.size()) throw error(errc::malformed_message, "malformed pool message: missing packed frame");
  auto* p = static_cast<const std::byte*>(frames[at].data());
  std::size_t size = frames[at].size(), pos = 0, next_blob = at + 1;
  auto need = [&](std::size_t n) {
    if (n > size - pos) throw error(errc::malformed_message, "malformed pool message: truncated item");
  };
  if (count > size / (with_status ? 9 : 8)) throw error(errc::malformed_message, "malformed pool message: too many items");
  std::vector<packed_item> out(count);
  for (auto& item : out) {
    if (with_status) {
      need(1);
      item.status = static_cast<std::uint8_t>(p[pos++]);
    }
    std::uint32_t bytes, blobs;
    need(8);
    std::memcpy(&bytes, p + pos, 4);
    std::memcpy(&blobs, p + pos + 4, 4);
    pos += 8;
    need(bytes);
    item.head = {p + pos, bytes};
    pos += bytes;
    if (blobs > frames.size() - next_blob) throw error(errc::malformed_message, "malformed pool message: missing large frame");
    for (std::uint32_t k = 0; k < blobs; ++k, ++next_blob)
      item.blobs.emplace_back(static_cast<const std::byte*>(frames[next_blob].data()), frames[next_blob].size());
  }
  if (pos != size) throw error(errc::malformed_message, "malformed pool message: trailing bytes");
  return out;
}

}  // namespace fiber::detail
