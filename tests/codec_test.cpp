#include <fiber/codec.hpp>
#include <gtest/gtest.h>

#include "support.hpp"

#include <vector>

namespace {

struct point {
  double x, y;
  std::string label;
  std::vector<int> tags;
};

// A user type with its own codec.
class money {
 public:
  money() = default;
  explicit money(long cents) : cents_(cents) {}
  long cents() const { return cents_; }
  friend bool operator==(const money&, const money&) = default;

 private:
  long cents_ = 0;
};

struct encoded {
  std::string head;
  std::vector<std::vector<std::byte>> frames;
  std::vector<std::span<const std::byte>> spans;
};

template <class T>
encoded encode(const T& v) {
  fiber::writer w;
  w.value(v);
  encoded e;
  e.head = w.head();
  for (auto& b : w.blobs()) e.frames.emplace_back(b.data, b.data + b.size);
  for (auto& f : e.frames) e.spans.emplace_back(f.data(), f.size());
  return e;
}

template <class T>
T decode(const encoded& e) {
  fiber::reader r({reinterpret_cast<const std::byte*>(e.head.data()), e.head.size()}, e.spans);
  T v = r.value<T>();
  EXPECT_TRUE(r.at_end());
  return v;
}

template <class T>
T round_trip(const T& v) {
  return decode<T>(encode(v));
}

}  // namespace

template <>
struct fiber::codec<money> {
  static void encode(writer& w, const money& m) { w.value(m.cents()); }
  static money decode(reader& r) { return money(r.value<long>()); }
};

TEST(codec, scalars_and_strings) {
  EXPECT_EQ(round_trip(42), 42);
  EXPECT_EQ(round_trip(-7ll), -7ll);
  EXPECT_DOUBLE_EQ(round_trip(3.25), 3.25);
  EXPECT_EQ(round_trip(true), true);
  EXPECT_EQ(round_trip(std::string("hello")), "hello");
  EXPECT_EQ(round_trip(std::string()), "");
  enum class color { red, green };
  EXPECT_EQ(round_trip(color::green), color::green);
}

TEST(codec, a_unique_ptr_travels_as_its_value_or_as_none) {
  auto back = decode<std::unique_ptr<std::string>>(encode(std::make_unique<std::string>("owned")));
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(*back, "owned");
  EXPECT_EQ(decode<std::unique_ptr<int>>(encode(std::unique_ptr<int>())), nullptr);
}

TEST(codec, containers) {
  std::vector<std::string> vs{"a", "bb", ""};
  EXPECT_EQ(round_trip(vs), vs);
  std::vector<bool> vb{true, false, true};
  EXPECT_EQ(round_trip(vb), vb);
  std::array<int, 3> a{1, 2, 3};
  EXPECT_EQ(round_trip(a), a);
  std::map<std::string, int> m{{"x", 1}, {"y", 2}};
  EXPECT_EQ(round_trip(m), m);
  std::unordered_map<int, std::vector<double>> um{{1, {1.5}}, {2, {}}};
  EXPECT_EQ(round_trip(um), um);
  std::set<int> s{3, 1, 2};
  EXPECT_EQ(round_trip(s), s);
}

TEST(codec, pair_tuple_optional_variant) {
  auto p = std::make_pair(1, std::string("one"));
  EXPECT_EQ(round_trip(p), p);
  auto t = std::make_tuple(1, 2.5, std::string("x"));
  EXPECT_EQ(round_trip(t), t);
  std::optional<int> none, some = 5;
  EXPECT_EQ(round_trip(none), none);
  EXPECT_EQ(round_trip(some), some);
  std::variant<int, std::string> v1 = 3, v2 = std::string("s");
  EXPECT_EQ(round_trip(v1), v1);
  EXPECT_EQ(round_trip(v2), v2);
}

TEST(codec, aggregates_and_user_types) {
  point p{1.5, -2, "origin", {1, 2, 3}};
  auto q = round_trip(p);
  EXPECT_EQ(q.x, p.x);
  EXPECT_EQ(q.y, p.y);
  EXPECT_EQ(q.label, p.label);
  EXPECT_EQ(q.tags, p.tags);
  EXPECT_EQ(round_trip(money(1999)), money(1999));
  std::vector<money> wallet{money(1), money(2)};
  EXPECT_EQ(round_trip(wallet), wallet);
}

// Members that are C arrays: each is one field (a count that took its elements for fields would
// name more fields than the type has, and the encoding would not compile).
struct sample {
  int id;
  double weights[4];
  std::string names[2];
  point corners[2];
  float grid[2][3];
  char tag[8];
};
struct only_an_array {
  std::uint8_t bytes[3];
};
struct no_fields {};

TEST(codec, aggregates_with_c_array_members_travel_whole) {
  static_assert(fiber::detail::field_count<sample>() == 6);
  static_assert(fiber::detail::field_count<only_an_array>() == 1);
  static_assert(fiber::detail::field_count<no_fields>() == 0);
  static_assert(fiber::detail::field_count<point>() == 4);
  sample s{7, {0.5, 1.5, 2.5, 3.5}, {"left", "right"}, {{1, 2, "a", {1}}, {3, 4, "b", {2, 3}}},
           {{1, 2, 3}, {4, 5, 6}}, "tagged"};
  auto t = round_trip(s);
  EXPECT_EQ(t.id, 7);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(t.weights[i], s.weights[i]) << i;
  EXPECT_EQ(t.names[0], "left");
  EXPECT_EQ(t.names[1], "right");
  EXPECT_EQ(t.corners[1].label, "b");
  EXPECT_EQ(t.corners[1].tags, (std::vector<int>{2, 3}));
  EXPECT_EQ(t.corners[0].x, 1.0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(t.grid[i][j], s.grid[i][j]) << i << "," << j;
  EXPECT_STREQ(t.tag, "tagged");
  EXPECT_EQ(round_trip(only_an_array{{1, 2, 3}}).bytes[2], 3);
  (void)round_trip(no_fields{});
  // The elements and nothing else: no count of fields or of elements.
  EXPECT_EQ(encode(only_an_array{{1, 2, 3}}).head.size(), 3u);
}

TEST(codec, large_contiguous_data_travels_as_its_own_frame) {
  std::vector<float> big(1 << 20, 0.5f);
  auto e = encode(big);
  ASSERT_EQ(e.frames.size(), 1u);  // not copied into the header frame
  EXPECT_EQ(e.frames[0].size(), big.size() * sizeof(float));
  EXPECT_LT(e.head.size(), 64u);
  EXPECT_EQ(decode<std::vector<float>>(e), big);

  std::vector<int> small(10, 1);
  EXPECT_TRUE(encode(small).frames.empty());
}

// What a writer wrote, read back by one reader (the frames in order).
template <class... T>
std::tuple<T...> read_all(fiber::writer& w) {
  std::vector<std::span<const std::byte>> spans;
  for (auto& b : w.blobs()) spans.emplace_back(b.data, b.size);
  fiber::reader r({reinterpret_cast<const std::byte*>(w.head().data()), w.head().size()}, spans);
  std::tuple<T...> out{r.template value<T>()...};
  EXPECT_TRUE(r.at_end());
  return out;
}

// pickle's memo for the bytes of one vector several values hold by reference: a writer asked to
// share ranges carries a large range once, and the later ones refer to it.
TEST(codec, a_large_range_written_again_travels_once_when_ranges_are_shared) {
  std::vector<double> theta(10000, 0.5), other(10000, 0.5);
  fiber::writer w;
  w.share_ranges();
  w.value(theta);
  w.value(theta);
  w.value(other);  // the same bytes at another address: a copy, which travels (as pickle's would)
  w.value(theta);
  EXPECT_EQ(w.blobs().size(), 2u);
  EXPECT_TRUE(w.shares_objects());
  auto [a, b, c, d] = read_all<std::vector<double>, std::vector<double>, std::vector<double>, std::vector<double>>(w);
  EXPECT_EQ(a, theta);
  EXPECT_EQ(b, theta);
  EXPECT_EQ(c, other);
  EXPECT_EQ(d, theta);

  // Not asked: every value travels whole.
  fiber::writer plain;
  plain.value(theta);
  plain.value(theta);
  EXPECT_EQ(plain.blobs().size(), 2u);
  EXPECT_FALSE(plain.shares_objects());
}

TEST(codec, an_address_that_holds_other_bytes_by_now_is_not_referred_to) {
  fiber::writer w;
  w.share_ranges();
  // Two temporaries, likely at one address in turn, with different bytes.
  w.value(std::vector<double>(10000, 1.0));
  w.value(std::vector<double>(10000, 2.0));
  EXPECT_EQ(w.blobs().size(), 2u);
  auto [a, b] = read_all<std::vector<double>, std::vector<double>>(w);
  EXPECT_EQ(a, std::vector<double>(10000, 1.0));
  EXPECT_EQ(b, std::vector<double>(10000, 2.0));
}

TEST(codec, a_reference_to_a_range_never_read_is_malformed) {
  fiber::writer w;
  w.share_ranges();
  std::vector<double> theta(10000, 0.5);
  w.value(theta);
  w.value(theta);
  // The second value alone, without the frame the first one carried.
  std::string head = w.head().substr(w.head().size() - 12);
  fiber::reader r({reinterpret_cast<const std::byte*>(head.data()), head.size()}, {});
  fiber_test::expect_error([&] { (void)r.value<std::vector<double>>(); }, fiber::errc::malformed_message,
                           {"repeated range number"});
}

TEST(codec, large_range_of_a_temporary_is_copied_at_once) {
  fiber::writer w;
  w.value(std::vector<double>(100000, 4.0));  // the temporary is gone after this line
  std::vector<double> clobber(100000, -1.0);  // reuse the freed memory
  ASSERT_EQ(w.blobs().size(), 1u);
  ASSERT_TRUE(w.blobs()[0].keep);
  std::vector<std::span<const std::byte>> spans{{w.blobs()[0].data, w.blobs()[0].size}};
  fiber::reader r({reinterpret_cast<const std::byte*>(w.head().data()), w.head().size()}, spans);
  EXPECT_EQ(r.value<std::vector<double>>(), std::vector<double>(100000, 4.0));
}

TEST(codec, owned_writer_references_memory_without_copying) {
  auto data = std::make_shared<std::vector<double>>(100000, 1.0);
  fiber::writer w(data);
  w.value(*data);
  ASSERT_EQ(w.blobs().size(), 1u);
  EXPECT_EQ(w.blobs()[0].data, reinterpret_cast<const std::byte*>(data->data()));
  EXPECT_EQ(w.blobs()[0].keep, data);
}

TEST(codec, truncated_input_is_an_error_not_a_crash) {
  auto e = encode(std::vector<std::string>{"abc", "defgh"});
  for (std::size_t cut = 0; cut < e.head.size(); ++cut) {
    encoded t = e;
    t.head.resize(cut);
    try {
      decode<std::vector<std::string>>(t);
      ADD_FAILURE() << "decoding " << cut << " of " << e.head.size() << " bytes succeeded";
    } catch (const fiber::error& err) {
      EXPECT_EQ(err.code(), fiber::errc::malformed_message);
    }
  }
}

TEST(codec, absurd_counts_are_rejected_before_allocating) {
  fiber::writer w;
  w.size(std::size_t{1} << 60);  // claims 2^60 strings
  encoded e{w.head(), {}, {}};
  fiber_test::expect_error([&] { decode<std::vector<std::string>>(e); }, fiber::errc::malformed_message, "element count");
}

// A count is bounded by the bytes left over each element's smallest encoding, not one byte each:
// a message of N bytes claiming N strings would otherwise have room made for all of them (32 N
// bytes) before the first is read.
TEST(codec, a_count_is_bounded_by_the_smallest_encoding_of_its_elements) {
  static_assert(fiber::detail::min_encoded_bytes<std::string>() == 8);
  static_assert(fiber::detail::min_encoded_bytes<point>() == 8 + 8 + 8 + 8);
  static_assert(fiber::detail::min_encoded_bytes<sample>() == 4 + 4 * 8 + 2 * 8 + 2 * 32 + 6 * 4 + 8);
  static_assert(fiber::detail::min_encoded_bytes<std::pair<int, std::optional<double>>>() == 5);
  static_assert(fiber::detail::min_encoded_bytes<std::array<std::int16_t, 3>>() == 6);
  static_assert(fiber::detail::min_encoded_bytes<money>() == 1);  // a user codec that says nothing
  static_assert(fiber::detail::min_encoded_bytes<no_fields>() == 0 && fiber::detail::count_bound_bytes<no_fields> == 1);
  // Nine strings claimed, room for eight lengths after the count.
  fiber::writer w;
  w.size(9);
  for (int i = 0; i < 8; ++i) w.size(0);
  encoded e{w.head(), {}, {}};
  fiber_test::expect_error([&] { decode<std::vector<std::string>>(e); }, fiber::errc::malformed_message, "element count");
  fiber::writer m;
  m.size(5);  // five int pairs need 40 bytes; 32 are there
  for (int i = 0; i < 8; ++i) m.pod(std::int32_t{i});
  encoded em{m.head(), {}, {}};
  fiber_test::expect_error([&] { decode<std::map<int, int>>(em); }, fiber::errc::malformed_message, "element count");
  // What fits is still read.
  EXPECT_EQ(round_trip(std::vector<point>(3, point{1, 2, "p", {1}})).size(), 3u);
}

TEST(codec, bad_variant_index_and_optional_flag) {
  fiber::writer w;
  w.pod(std::uint32_t{7});
  encoded e{w.head(), {}, {}};
  EXPECT_THROW((decode<std::variant<int, double>>(e)), fiber::error);
  fiber::writer w2;
  w2.pod(std::uint8_t{9});
  encoded e2{w2.head(), {}, {}};
  EXPECT_THROW(decode<std::optional<int>>(e2), fiber::error);
}

TEST(codec, missing_or_wrong_size_large_frame) {
  auto e = encode(std::vector<double>(5000, 2.0));
  encoded no_frame = e;
  no_frame.spans.clear();
  EXPECT_THROW(decode<std::vector<double>>(no_frame), fiber::error);
  encoded short_frame = e;
  short_frame.spans[0] = short_frame.spans[0].first(100);
  EXPECT_THROW(decode<std::vector<double>>(short_frame), fiber::error);
}

// Fuzzing found a bool decoded from a byte that is neither 0 nor 1 (undefined behaviour).
TEST(codec, a_bool_is_a_zero_or_one_byte_and_anything_else_is_malformed) {
  EXPECT_EQ(round_trip(true), true);
  EXPECT_EQ(round_trip(false), false);
  EXPECT_EQ(round_trip(std::vector<bool>{true, false, true}), (std::vector<bool>{true, false, true}));
  for (std::uint8_t junk : {std::uint8_t{2}, std::uint8_t{0x80}, std::uint8_t{0xff}}) {
    fiber::writer w;
    w.pod(junk);
    encoded e{w.head(), {}, {}};
    fiber_test::expect_error([&] { decode<bool>(e); }, fiber::errc::malformed_message, "bool");
    fiber::writer wv;
    wv.size(2);
    wv.pod(std::uint8_t{1});
    wv.pod(junk);
    encoded ev{wv.head(), {}, {}};
    fiber_test::expect_error([&] { decode<std::vector<bool>>(ev); }, fiber::errc::malformed_message, "bool");
  }
}

// ---- shared_ptr: sharing kept within a message, as pickle's memo keeps it

TEST(codec, shared_ptr_round_trips_with_null_and_const) {
  auto p = round_trip(std::make_shared<point>(point{1, 2, "p", {3}}));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->label, "p");
  EXPECT_EQ(p->tags, std::vector<int>{3});
  EXPECT_EQ(round_trip(std::shared_ptr<int>()), nullptr);
  auto c = round_trip(std::shared_ptr<const std::string>(std::make_shared<std::string>("constant")));
  EXPECT_EQ(*c, "constant");
}

TEST(codec, an_object_several_pointers_share_travels_once_and_is_shared_again) {
  auto theta = std::make_shared<const std::vector<double>>(10000, 0.5);  // 80 KB
  std::vector<std::shared_ptr<const std::vector<double>>> batch(16, theta);
  fiber::writer w;
  w.value(batch);
  ASSERT_EQ(w.blobs().size(), 1u);  // one frame for sixteen references...
  EXPECT_LT(w.total_size(), theta->size() * sizeof(double) + 1024);
  EXPECT_EQ(w.blobs()[0].data, reinterpret_cast<const std::byte*>(theta->data()));  // ...referenced, not copied
  encoded e;
  e.head = w.head();
  for (auto& b : w.blobs()) e.frames.emplace_back(b.data, b.data + b.size);
  for (auto& f : e.frames) e.spans.emplace_back(f.data(), f.size());
  auto back = decode<std::vector<std::shared_ptr<const std::vector<double>>>>(e);
  ASSERT_EQ(back.size(), 16u);
  EXPECT_EQ(*back[0], *theta);
  for (auto& p : back) EXPECT_EQ(p, back[0]);  // one object again, as in the sender
}

TEST(codec, readers_of_one_writers_parts_can_share_its_objects) {
  // A pool chunk: items written one after the other by one writer, each read by a reader of its own.
  auto shared = std::make_shared<std::string>("written once");
  fiber::writer w;
  w.value(shared);
  auto first_end = w.head().size();
  w.value(shared);
  auto bytes = [&](std::size_t from, std::size_t to) {
    return std::span<const std::byte>(reinterpret_cast<const std::byte*>(w.head().data()) + from, to - from);
  };
  fiber::shared_objects table;
  fiber::reader first(bytes(0, first_end), {}), second(bytes(first_end, w.head().size()), {});
  first.share_objects(table);
  second.share_objects(table);
  auto a = first.value<std::shared_ptr<std::string>>();
  auto b = second.value<std::shared_ptr<std::string>>();
  EXPECT_EQ(*b, "written once");
  EXPECT_EQ(a, b);
  // Read alone, the second item refers to an object its reader never saw: malformed, not a crash.
  fiber::reader alone(bytes(first_end, w.head().size()), {});
  fiber_test::expect_error([&] { alone.value<std::shared_ptr<std::string>>(); }, fiber::errc::malformed_message, "shared object number");
}

TEST(codec, an_object_that_died_does_not_lend_its_address_to_the_next) {
  // Each temporary dies after it is written; had the writer not kept it, the second could reuse
  // its address and be written as a reference to the first.
  fiber::writer w;
  for (int i = 0; i < 2; ++i) w.value(std::make_shared<int>(i + 1));
  fiber::reader r({reinterpret_cast<const std::byte*>(w.head().data()), w.head().size()}, {});
  EXPECT_EQ(*r.value<std::shared_ptr<int>>(), 1);
  EXPECT_EQ(*r.value<std::shared_ptr<int>>(), 2);
}

TEST(codec, a_reference_to_an_object_of_another_type_or_an_unknown_number_is_malformed) {
  fiber::writer w;
  auto n = std::make_shared<int>(7);
  w.value(n);
  w.value(n);
  fiber::reader other_type({reinterpret_cast<const std::byte*>(w.head().data()), w.head().size()}, {});
  EXPECT_EQ(*other_type.value<std::shared_ptr<int>>(), 7);
  fiber_test::expect_error([&] { other_type.value<std::shared_ptr<double>>(); }, fiber::errc::malformed_message, "another type");
  std::string unknown{'\x02', '\x05', '\0', '\0', '\0'};  // "again", object number 5
  fiber::reader r({reinterpret_cast<const std::byte*>(unknown.data()), unknown.size()}, {});
  fiber_test::expect_error([&] { r.value<std::shared_ptr<int>>(); }, fiber::errc::malformed_message, "shared object number");
  std::string bad_flag{'\x07'};
  fiber::reader f({reinterpret_cast<const std::byte*>(bad_flag.data()), bad_flag.size()}, {});
  fiber_test::expect_error([&] { f.value<std::shared_ptr<int>>(); }, fiber::errc::malformed_message, "shared_ptr flag");
}
