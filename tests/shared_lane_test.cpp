// One side of a link's bytes through shared memory on an io_context: a reader that waits is rung
// once and only when it waits, a writer that waits for room is rung when the reader drains, a
// thread outside the loop waits for room by itself, and a closed lane leaves the loop nothing.
#include "transport/shared_lane.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

using fiber::detail::shared_channel;
using fiber::detail::shared_lane;

namespace {
struct lane_pair {
  asio::io_context io;
  std::shared_ptr<shared_lane> a, b;
  lane_pair() {
    auto made = shared_channel::make(shared_channel::min_capacity, false);
    auto joined = shared_channel::join(::dup(made->segment_fd()), ::dup(made->dialer_bell()), ::dup(made->acceptor_bell()), false);
    a = shared_lane::open(io, std::move(made));
    b = shared_lane::open(io, std::move(joined));
  }
  std::size_t write(std::shared_ptr<shared_lane>& to, const std::string& s) {
    iovec iov{const_cast<char*>(s.data()), s.size()};
    return to->write(&iov, 1);
  }
  /// Fills a's ring to the last byte.
  void fill_a() {
    std::string full(shared_channel::min_capacity, 'f');
    ASSERT_EQ(write(a, full), full.size());
  }
};
}  // namespace

TEST(shared_lane, a_reader_that_waits_is_rung_once_and_reads_what_came) {
  lane_pair p;
  std::string got;
  p.b->when_readable([&] {
    char buf[64];
    got.assign(buf, p.b->read(buf, sizeof buf));
  });
  p.io.poll();
  EXPECT_TRUE(got.empty()) << "nothing written yet";
  EXPECT_EQ(p.write(p.a, "hello"), 5u);
  EXPECT_EQ(p.write(p.a, " again"), 6u);
  EXPECT_EQ(p.a->channel().rings(), 1u) << "the second write finds the reader already rung";
  while (got.empty() && p.io.run_one()) {
  }
  EXPECT_EQ(got, "hello again");
  p.a->close();
  p.b->close();
}

TEST(shared_lane, bytes_already_there_are_read_at_once_without_a_ring) {
  lane_pair p;
  EXPECT_EQ(p.write(p.a, "early"), 5u);
  bool called = false;
  p.b->when_readable([&] { called = true; });
  p.io.poll();
  EXPECT_TRUE(called);
  EXPECT_EQ(p.a->channel().rings(), 0u);
  p.a->close();
  p.b->close();
}

TEST(shared_lane, a_writer_waiting_for_room_is_rung_when_the_reader_drains) {
  lane_pair p;
  p.fill_a();
  EXPECT_EQ(p.write(p.a, "x"), 0u) << "the ring is full";
  bool room = false;
  p.a->when_writable([&] { room = true; });
  p.io.poll();
  EXPECT_FALSE(room);
  char buf[100];
  EXPECT_EQ(p.b->read(buf, sizeof buf), sizeof buf);
  EXPECT_EQ(p.b->channel().rings(), 1u) << "the reader rang the waiting writer";
  while (!room && p.io.run_one()) {
  }
  EXPECT_TRUE(room);
  p.a->close();
  p.b->close();
}

TEST(shared_lane, a_thread_outside_the_loop_waits_for_room_itself_and_gives_up_at_its_deadline) {
  lane_pair p;
  p.fill_a();
  EXPECT_FALSE(p.a->wait_writable(shared_lane::clock::now())) << "full, and the deadline has passed";
  std::thread reader([&] {
    char buf[10];
    EXPECT_EQ(p.b->read(buf, sizeof buf), sizeof buf);
  });
  EXPECT_TRUE(p.a->wait_writable(shared_lane::clock::time_point::max()));
  reader.join();
  p.a->close();
  p.b->close();
}

TEST(shared_lane, closed_lanes_drop_their_callbacks_and_leave_the_loop_nothing_to_wait_for) {
  lane_pair p;
  auto held = std::make_shared<int>(1);
  p.b->when_readable([held] {});
  p.a->close();
  p.b->close();
  p.io.run();  // returns: no doorbell is watched any more
  EXPECT_EQ(held.use_count(), 1) << "the callback was dropped";
}
