// Protocol Buffers' wire format as core/proto_out writes it, checked against the encoding's own
// examples (protobuf.dev's "Encoding": field 1 = 150 is 08 96 01) and its rules for negative
// numbers, fixed 64-bit values, texts and nested messages.
#include "core/proto_out.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {
std::string hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}
}  // namespace

TEST(proto_out, a_varint_field_is_its_tag_then_seven_bits_a_byte_low_first) {
  std::string b;
  fiber::detail::proto_out p(b);
  p.uint(1, 150);
  EXPECT_EQ(hex(b), "089601");
  b.clear();
  p.uint(60, 1);  // a tag past 15 takes two bytes
  EXPECT_EQ(hex(b), "e00301");
}

TEST(proto_out, a_negative_int64_is_ten_bytes_of_twos_complement) {
  std::string b;
  fiber::detail::proto_out p(b);
  p.int64(4, -1);
  EXPECT_EQ(hex(b), "20ffffffffffffffffff01");
}

TEST(proto_out, fixed64_and_double_are_eight_bytes_little_endian) {
  std::string b;
  fiber::detail::proto_out p(b);
  p.fixed64(47, 0x0102030405060708ull);
  EXPECT_EQ(hex(b), "f9020807060504030201");
  b.clear();
  p.real(44, 1.0);
  EXPECT_EQ(hex(b), "e102000000000000f03f");
}

TEST(proto_out, a_nested_message_gets_its_length_once_closed_at_every_depth) {
  std::string b;
  fiber::detail::proto_out p(b);
  p.open(1);
  p.text(2, "testing");
  p.open(3);
  p.uint(1, 150);
  p.close();
  p.close();
  // 1 { 2: "testing", 3 { 1: 150 } }: inner 3 bytes, outer 2 + 7 + 2 + 3 = 14.
  EXPECT_EQ(hex(b), "0a0e1207" + hex("testing") + "1a03089601");
  b.clear();
  p.open(1);
  p.text(2, std::string(200, 'x'));  // a length past 127 takes two bytes
  p.close();
  EXPECT_EQ(hex(b.substr(0, 6)), "0acb0112c801");
  EXPECT_EQ(b.size(), 3 + 3 + 200u);
}
