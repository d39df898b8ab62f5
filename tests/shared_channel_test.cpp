// Shared memory between two processes on one host: bytes in order across the ring's end, and
// what a broken peer's segment or counters cannot make this side do.
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <numeric>
#include <vector>

#include "transport/shared_channel.hpp"

using fiber::detail::shared_channel;

namespace {
// The acceptor's side of `dialer`'s segment, as the mesh makes it from the passed descriptors.
std::unique_ptr<shared_channel> accept_side(const shared_channel& dialer) {
  return shared_channel::join(::dup(dialer.segment_fd()), ::dup(dialer.dialer_bell()), ::dup(dialer.acceptor_bell()));
}
}  // namespace

TEST(shared_channel, bytes_arrive_in_order_both_ways_across_the_rings_end) {
  auto a = shared_channel::make();
  ASSERT_NE(a, nullptr);
  auto b = accept_side(*a);
  ASSERT_NE(b, nullptr);
  // 2.5 rings' worth in uneven pieces, so that writes and reads cut the ring's end.
  std::vector<char> sent(a->capacity() * 5 / 2), got_b(sent.size()), got_a(sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<char>(i * 7 + i / 4093);
  std::size_t wa = 0, wb = 0, ra = 0, rb = 0;
  while (rb < sent.size() || ra < sent.size()) {
    wa += a->write_some(sent.data() + wa, std::min<std::size_t>(sent.size() - wa, 300'007));
    wb += b->write_some(sent.data() + wb, std::min<std::size_t>(sent.size() - wb, 170'001));
    rb += b->read_some(got_b.data() + rb, std::min<std::size_t>(got_b.size() - rb, 250'003));
    ra += a->read_some(got_a.data() + ra, std::min<std::size_t>(got_a.size() - ra, 410'009));
  }
  EXPECT_EQ(got_b, sent);
  EXPECT_EQ(got_a, sent);
}

TEST(shared_channel, a_ring_holds_its_capacity_and_no_more) {
  auto a = shared_channel::make();
  ASSERT_NE(a, nullptr);
  auto b = accept_side(*a);
  ASSERT_NE(b, nullptr);
  std::vector<char> big(a->capacity() + 100, 'x');
  EXPECT_EQ(a->write_some(big.data(), big.size()), a->capacity());
  EXPECT_EQ(a->write_some(big.data(), 1), 0u);
  EXPECT_FALSE(b->sleep_for_read());  // there is something to read: no sleeping
}

TEST(shared_channel, a_passed_segment_cannot_be_shrunk_by_either_side) {
  // A peer that shrank the segment would kill this side with SIGBUS at its next read or write.
  auto a = shared_channel::make(8192);
  ASSERT_NE(a, nullptr);
  auto b = accept_side(*a);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->capacity(), 8192u) << "the capacity comes with the segment";
  EXPECT_NE(::ftruncate(b->segment_fd(), 0), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::ftruncate(a->segment_fd(), 4096), 0);
  char byte = 'x';
  EXPECT_EQ(a->write_some(&byte, 1), 1u);
  EXPECT_EQ(b->read_some(&byte, 1), 1u);
}

TEST(shared_channel, an_unsealed_segment_is_refused_not_mapped) {
  // A segment its maker could still shrink: the shape is right, the seals are missing.
  auto a = shared_channel::make(8192);
  ASSERT_NE(a, nullptr);
  int segment = ::memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_GE(segment, 0);
  struct stat st {};
  ASSERT_EQ(::fstat(a->segment_fd(), &st), 0);
  ASSERT_EQ(::ftruncate(segment, st.st_size), 0);
  EXPECT_EQ(shared_channel::join(segment, ::dup(a->dialer_bell()), ::dup(a->acceptor_bell())), nullptr);
}

TEST(shared_channel, a_segment_shorter_than_the_rings_is_refused_not_mapped) {
  // Mapped anyway, reading its missing pages would kill this process with SIGBUS.
  int segment = ::memfd_create("short", MFD_CLOEXEC);
  ASSERT_GE(segment, 0);
  ASSERT_EQ(::ftruncate(segment, 4096), 0);
  int bell_a = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), bell_b = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  EXPECT_EQ(shared_channel::join(segment, bell_a, bell_b), nullptr);
}

TEST(shared_channel, counters_broken_by_a_peer_give_no_room_that_is_not_there) {
  auto a = shared_channel::make();
  ASSERT_NE(a, nullptr);
  auto b = accept_side(*a);
  ASSERT_NE(b, nullptr);
  b->consume(100);  // the reader's tail now stands past what was written
  std::vector<char> big(a->capacity() + 100, 'x');
  EXPECT_EQ(a->write_some(big.data(), big.size()), 0u);
}
