#include "primitives/pool/wire.hpp"

#include <cstring>

#include "fiber/detail/pool_sinks.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

std::vector<packed_item> unpack(const multipart& frames, std::size_t at, std::size_t count, bool with_status) {
  if (at >= frames.size()) throw error(errc::malformed_message, "malformed pool message: missing packed frame");
  auto* p = static_cast<const std::byte*>(frames[at].data());
  std::size_t size = frames[at].size(), pos = 0, next_blob = at + 1;
  auto need = [&](std::size_t n) {
    if (n > size - pos) throw error(errc::malformed_message, "malformed pool message: truncated item");
  };
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

void append_failed_item(writer& results, std::size_t status_at, std::size_t blobs_at, const remote_failure& f) {
  auto& head = results.head();
  head.resize(status_at);
  results.blobs().resize(blobs_at);
  head.push_back(f.in_fiber ? item_failed : item_raised);
  auto text = f.encode();
  append_item(results, [&](writer& w) { w.bytes(text.data(), text.size()); });
}

}  // namespace fiber::detail
