// Protocol Buffers' wire format, appended to a string: varints, fixed 64-bit values, texts and
// nested messages (opened and closed, their length put in front once known). The few messages
// fiber writes (Perfetto's trace packets) need no generated code nor the protobuf library.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace fiber::detail {

class proto_out {
 public:
  explicit proto_out(std::string& to) : b_(to) {}

  void uint(std::uint32_t field, std::uint64_t v) {
    tag(field, 0);
    varint(v);
  }
  /// A signed field (int32, int64): two's complement, as protobuf writes it.
  void int64(std::uint32_t field, std::int64_t v) { uint(field, static_cast<std::uint64_t>(v)); }
  void fixed64(std::uint32_t field, std::uint64_t v) {
    tag(field, 1);
    for (int i = 0; i < 8; ++i) b_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void real(std::uint32_t field, double v) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    fixed64(field, bits);
  }
  void text(std::uint32_t field, std::string_view s) {
    tag(field, 2);
    varint(s.size());
    b_.append(s);
  }
  /// Opens a nested message in `field`; what follows up to the matching close() is its content.
  void open(std::uint32_t field) {
    tag(field, 2);
    opened_.push_back(b_.size());
  }
  void close() {
    auto at = opened_.back();
    opened_.pop_back();
    char len[10];
    auto n = encode(b_.size() - at, len);
    b_.insert(at, len, n);
  }

  /// `v` as a varint into `out` (10 bytes at most); returns its length.
  static std::size_t encode(std::uint64_t v, char* out) {
    std::size_t n = 0;
    do {
      auto byte = static_cast<unsigned char>(v & 0x7f);
      v >>= 7;
      out[n++] = static_cast<char>(v ? byte | 0x80 : byte);
    } while (v);
    return n;
  }

 private:
  void tag(std::uint32_t field, std::uint32_t wire) { varint(std::uint64_t(field) << 3 | wire); }
  void varint(std::uint64_t v) {
    char buf[10];
    b_.append(buf, encode(v, buf));
  }

  std::string& b_;
  std::vector<std::size_t> opened_;
};

}  // namespace fiber::detail
