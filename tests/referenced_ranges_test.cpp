// A large range that items hold by reference, on its own: written inside writer::referenced it
// becomes one shared object per call (not one copy per chunk), a reader in a process that holds
// the object reads the same bytes back, and a reader that lacks it, or a changed object at the
// same address, is not fooled.
#include "primitives/pool/referenced_ranges.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "fiber/codec.hpp"
#include "fiber/detail/shared_entry.hpp"
#include "fiber/error.hpp"

namespace {
using namespace fiber::detail;
using fiber::reader;
using fiber::writer;

std::vector<double> big(double start) {
  std::vector<double> v(200000);  // 1.6 MB: worth an object of its own
  std::iota(v.begin(), v.end(), start);
  return v;
}

// Three chunks of a call, each writing the same vector by reference twice.
TEST(referenced_ranges, one_object_carries_a_vector_however_many_chunks_hold_it) {
  auto theta = big(0);
  referenced_ranges refs;
  std::vector<writer> chunks(3);
  for (auto& w : chunks) {
    w.share_referenced_ranges(&refs);
    for (int item = 0; item < 2; ++item) w.referenced([&] { w.value(theta); });
  }
  EXPECT_EQ(refs.size(), 1u);
  for (auto& w : chunks) {
    ASSERT_EQ(w.shared_attached().size(), 1u);
    EXPECT_EQ(w.shared_attached()[0], chunks[0].shared_attached()[0]) << "the same object, not a copy per chunk";
    EXPECT_LT(w.total_size(), 100u) << "the chunk carries the object's id, not its bytes";
  }
  // Read back where the object is held (this process made it): the same elements, twice.
  auto& w = chunks[1];
  std::vector<std::span<const std::byte>> blobs;
  for (auto& b : w.blobs()) blobs.emplace_back(b.data, b.size);
  reader r({reinterpret_cast<const std::byte*>(w.head().data()), w.head().size()}, blobs);
  EXPECT_EQ(r.value<std::vector<double>>(), theta);
  EXPECT_EQ(r.value<std::vector<double>>(), theta);
  EXPECT_TRUE(r.at_end());
}

TEST(referenced_ranges, other_bytes_at_the_same_address_are_another_object) {
  auto theta = big(0);
  referenced_ranges refs;
  auto first = refs.share(theta.data(), theta.size() * sizeof(double));
  std::iota(theta.begin(), theta.end(), 7.0);  // the caller changed it in place
  auto second = refs.share(theta.data(), theta.size() * sizeof(double));
  EXPECT_NE(first, second);
  EXPECT_NE(first->id(), second->id());
}

TEST(referenced_ranges, a_range_written_outside_referenced_stays_in_the_chunk) {
  auto theta = big(0);
  referenced_ranges refs;
  writer w;
  w.share_referenced_ranges(&refs);
  w.value(theta);
  EXPECT_EQ(refs.size(), 0u);
  EXPECT_TRUE(w.shared_attached().empty());
  EXPECT_GE(w.total_size(), theta.size() * sizeof(double));
}

// Under min_bytes an object of its own costs more than the copy: the range stays in the chunk,
// once per chunk however many of its items hold it.
TEST(referenced_ranges, a_small_range_stays_in_its_chunk_once) {
  std::vector<double> small(20000, 0.5);  // 160 kB
  referenced_ranges refs;
  writer w;
  w.share_ranges();
  w.share_referenced_ranges(&refs);
  for (int item = 0; item < 3; ++item) w.referenced([&] { w.value(small); });
  EXPECT_EQ(refs.size(), 0u);
  EXPECT_TRUE(w.shared_attached().empty());
  EXPECT_EQ(w.blobs().size(), 1u) << "written once, referred to after";
}

TEST(referenced_ranges, a_reader_that_lacks_the_object_gets_a_malformed_message) {
  std::uint64_t id = 0;
  writer w;
  {
    auto theta = big(0);
    referenced_ranges refs;
    w.share_referenced_ranges(&refs);
    w.referenced([&] { w.value(theta); });
    id = w.shared_attached().at(0)->id();
  }
  // The writer still holds the object (it is attached): a reader gets the bytes. A message that
  // names an id this process never received is refused, with words.
  auto head = w.head();
  id += 1000;
  std::memcpy(head.data() + sizeof(std::uint64_t), &id, sizeof id);
  reader r({reinterpret_cast<const std::byte*>(head.data()), head.size()}, {});
  try {
    (void)r.value<std::vector<double>>();
    FAIL() << "read a range it was never sent";
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::malformed_message);
    EXPECT_NE(std::string(e.what()).find("never sent to this process"), std::string::npos) << e.what();
  }
}

}  // namespace
