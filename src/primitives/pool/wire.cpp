#include "primitives/pool/wire.hpp"

#include <cstring>

#include "fiber/error.hpp"

namespace fiber::detail {

item_writer::mark item_writer::begin_item() {
  mark at{chunk_.head().size(), chunk_.blobs().size()};
  chunk_.head().append(8, '\0');  // [u32 inline bytes][u32 large frames], filled in by end_item
  return at;
}

void item_writer::end_item(mark at) {
  auto& head = chunk_.head();
  auto bytes = static_cast<std::uint32_t>(head.size() - at.head - 8);
  auto blobs = static_cast<std::uint32_t>(chunk_.blobs().size() - at.blobs);
  std::memcpy(&head[at.head], &bytes, 4);
  std::memcpy(&head[at.head + 4], &blobs, 4);
}

std::vector<packed_item> unpack(const multipart& frames, std::size_t at, std::size_t count, bool with_status) {
  if (at >= frames.size()) throw error(errc::malformed_message, "malformed pool message: missing packed frame");
  auto* p = static_cast<const std::byte*>(frames[at].data());
  std::size_t size = frames[at].size(), pos = 0, next_blob = at + 1;
  auto need = [&](std::size_t n) {
    if (n > size - pos) throw error(errc::malformed_message, "malformed pool message: truncated item");
  };
  // A count no packed frame could hold is refused before anything is allocated for it.
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

void append_failed_item(writer& results, const remote_failure& f) {
  results.head().push_back(f.in_fiber ? item_failed : item_raised);
  auto text = f.encode();
  item_writer(results).add([&](writer& w) { w.bytes(text.data(), text.size()); });
}

}  // namespace fiber::detail
