// What fiber's parsers of a peer's frames face: the pool's packed items (a task's arguments at a
// worker, a chunk's results at the master), a manager's reply, and the ring store's calls and
// replies. Arbitrary bytes are cut into a header's fields and frames; the first byte picks the
// parser. Shared by the libFuzzer target (peer_bytes_fuzz.cpp, FIBER_FUZZ=ON) and the corpus
// regression test. Each parser returns normally or throws fiber::error(malformed_message).
#pragma once
#include <fiber/error.hpp>

#include <cstdint>
#include <span>
#include <string_view>

#include "core/remote_failure.hpp"
#include "primitives/manager/wire.hpp"
#include "primitives/pool/wire.hpp"
#include "primitives/ring/wire.hpp"

namespace fiber_fuzz {

/// `bytes` as up to four frames: each led by a length byte (what is left when it is larger).
inline fiber::detail::multipart frames_of(std::span<const std::uint8_t> bytes) {
  fiber::detail::multipart m;
  while (!bytes.empty() && m.size() < 4) {
    std::size_t n = std::min<std::size_t>(bytes[0], bytes.size() - 1);
    m.emplace_back(bytes.data() + 1, n);
    bytes = bytes.subspan(1 + n);
  }
  return m;
}

inline void peer_bytes_one(const std::uint8_t* data, std::size_t size) {
  using namespace fiber::detail;
  if (size < 3) return;
  auto pick = data[0] % 5;
  auto small = data[1];  // an item count, a status, or a kind's offset
  std::span<const std::uint8_t> rest(data + 2, size - 2);
  switch (pick) {
    case 0:  // a pool task's arguments, as a worker reads them
    case 1: {  // a chunk's results, as the master reads them: status bytes, then failures
      auto frames = frames_of(rest);
      bool results = pick == 1;
      for (auto& item : unpack(frames, 0, small % 16, results)) {
        if (results && item.status != item_value)
          (void)remote_failure::decode({reinterpret_cast<const char*>(item.head.data()), item.head.size()});
      }
      return;
    }
    case 2: {  // a manager's reply: its status (aux) and frames
      completion<message> c;
      complete_from_reply(c, small % 4, frames_of(rest));
      if (c.value) (void)decode_message<std::string>(*c.value);  // a value, read as a caller would
      return;
    }
    case 3: {  // a member's call to the ring's store
      header h;
      h.type = static_cast<kind>(first_service_kind + small % 32);
      h.aux = rest.size();
      (void)read_store_request(h, frames_of(rest));
      return;
    }
    default: {  // the store's replies as a member reads them, and what add finds stored
      std::string_view text(reinterpret_cast<const char*>(rest.data()), rest.size());
      (void)stored_number(text);
      (void)remote_failure::decode(text);
      (void)read_add_reply(text);
      return;
    }
  }
}

}  // namespace fiber_fuzz
