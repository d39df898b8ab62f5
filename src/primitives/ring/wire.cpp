#include "primitives/ring/wire.hpp"

#include <charconv>
#include <cstring>

#include "fiber/error.hpp"

namespace fiber::detail {

store_request read_store_request(const header& h, const multipart& payload) {
  if (h.type != ring_kind::set && h.type != ring_kind::get && h.type != ring_kind::add)
    throw error(errc::malformed_message, "malformed ring message: not a store call");
  if (payload.empty()) throw error(errc::malformed_message, "malformed ring message: no key");
  store_request r;
  r.type = h.type;
  r.key = payload[0].to_string();
  if (h.type == ring_kind::set) {
    if (payload.size() != 2) throw error(errc::malformed_message, "malformed ring set: a key and a value, no more");
    r.value = payload[1].to_string();
  } else if (h.type == ring_kind::get) {
    if (payload.size() != 1) throw error(errc::malformed_message, "malformed ring get: a key, no more");
    r.timeout = std::chrono::milliseconds(h.aux);
  } else {
    if (payload.size() != 2 || payload[1].size() != sizeof r.delta)
      throw error(errc::malformed_message, "malformed ring add: a key and an 8-byte delta");
    std::memcpy(&r.delta, payload[1].data(), sizeof r.delta);
  }
  return r;
}

std::int64_t read_add_reply(std::string_view reply) {
  std::int64_t sum = 0;
  if (reply.size() != sizeof sum) throw error(errc::malformed_message, "malformed ring add reply");
  std::memcpy(&sum, reply.data(), sizeof sum);
  return sum;
}

std::optional<std::int64_t> stored_number(std::string_view text) {
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return n;
}

}  // namespace fiber::detail
