// The direct link between a master and its local children: multipart messages over a unix stream
// socket, or through shared memory once both sides took a lane, in order, whole, whatever their
// sizes and however the bytes arrive. Each test runs both ways.
#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <asio/local/connect_pair.hpp>
#include <asio/write.hpp>
#include <thread>
#include <unistd.h>

#include "fiber/error.hpp"
#include "transport/shared_lane.hpp"
#include "transport/stream_link.hpp"

using fiber::detail::multipart;
using fiber::detail::shared_channel;
using fiber::detail::shared_lane;
using fiber::detail::stream_link;

namespace {
multipart message_of(std::initializer_list<std::string> parts) {
  multipart m;
  for (auto& p : parts) m.emplace_back(p.data(), p.size());
  return m;
}
std::vector<std::string> texts(const multipart& m) {
  std::vector<std::string> out;
  for (auto& p : m) out.push_back(p.to_string());
  return out;
}

// Moves a's and b's bytes to one shared segment, as the master and its child do after the greeting.
void share(const std::shared_ptr<stream_link>& a, asio::io_context& io_a, const std::shared_ptr<stream_link>& b,
           asio::io_context& io_b) {
  auto made = shared_channel::make(shared_lane::link_capacity, /*populate=*/false);
  ASSERT_NE(made, nullptr);
  auto joined = shared_channel::join(::dup(made->segment_fd()), ::dup(made->dialer_bell()), ::dup(made->acceptor_bell()), false);
  ASSERT_NE(joined, nullptr);
  ASSERT_TRUE(a->use_lane(shared_lane::open(io_a, std::move(made))));
  ASSERT_TRUE(b->use_lane(shared_lane::open(io_b, std::move(joined))));
}

class stream_link_test : public ::testing::TestWithParam<bool> {
 protected:
  bool shared() const { return GetParam(); }
};
INSTANTIATE_TEST_SUITE_P(stream_link, stream_link_test, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "shared_memory" : "socket"; });

struct linked_pair {
  asio::io_context io;
  std::shared_ptr<stream_link> a, b;
  std::vector<multipart> received;  // by b
  std::error_code closed;  // why b's reading ended
  bool b_closed = false;

  explicit linked_pair(bool shared, std::size_t limit = std::size_t{1} << 30) {
    asio::local::stream_protocol::socket sa(io), sb(io);
    asio::local::connect_pair(sa, sb);
    a = std::make_shared<stream_link>(std::move(sa), limit);
    b = std::make_shared<stream_link>(std::move(sb), limit);
    if (shared) share(a, io, b, io);
    a->start([](multipart) {}, [](std::error_code) {});
    b->start([this](multipart m) { received.push_back(std::move(m)); },
             [this](std::error_code ec) {
               closed = ec;
               b_closed = true;
             });
  }
  void run_until(std::size_t messages) {
    while (received.size() < messages && !b_closed && io.run_one()) {
    }
  }
};
}  // namespace

TEST_P(stream_link_test, messages_arrive_whole_and_in_order) {
  linked_pair p(shared());
  p.a->send(message_of({"header", "", "a third part"}));
  p.a->send(message_of({}));
  p.a->send(message_of({"x"}));
  p.run_until(3);
  ASSERT_EQ(p.received.size(), 3u);
  EXPECT_EQ(texts(p.received[0]), (std::vector<std::string>{"header", "", "a third part"}));
  EXPECT_TRUE(p.received[1].empty());
  EXPECT_EQ(texts(p.received[2]), std::vector<std::string>{"x"});
}

TEST_P(stream_link_test, a_coalescing_link_writes_what_one_turn_sent_at_once_and_in_order) {
  linked_pair p(shared());
  p.a->set_coalescing(true);
  for (int i = 0; i < 100; ++i) p.a->send(message_of({"message", std::to_string(i)}));
  EXPECT_EQ(p.a->writes(), 0u) << "small messages wait for the end of the turn";
  std::string large(20 << 10, 'l');  // past what is coalesced: what waits goes first, then it
  p.a->send(message_of({"large", large}));
  EXPECT_EQ(p.a->writes(), 2u);
  p.a->send(message_of({"after"}));
  p.run_until(102);
  ASSERT_EQ(p.received.size(), 102u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(texts(p.received[i]), (std::vector<std::string>{"message", std::to_string(i)}));
  EXPECT_EQ(texts(p.received[100]), (std::vector<std::string>{"large", large}));
  EXPECT_EQ(texts(p.received[101]), std::vector<std::string>{"after"});
  EXPECT_EQ(p.a->writes(), 3u) << "the last one in a write of its own, after the turn";
}

TEST_P(stream_link_test, large_messages_larger_than_the_socket_buffer_from_both_kinds_of_send) {
  linked_pair p(shared());
  std::string big(8 << 20, 'b'), other(3 << 20, 'o');
  for (std::size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>('a' + i / 4096 % 26);
  p.a->send(message_of({"first", big}));  // queued, written as the reader drains the socket
  p.run_until(1);
  // A blocking sender on another thread while the loop reads (the server's way of replying).
  std::thread sender([&] { EXPECT_FALSE(p.a->send_blocking(message_of({other, "last"}))); });
  p.run_until(2);
  sender.join();
  ASSERT_EQ(p.received.size(), 2u);
  EXPECT_EQ(texts(p.received[0]), (std::vector<std::string>{"first", big}));
  EXPECT_EQ(texts(p.received[1]), (std::vector<std::string>{other, "last"}));
}

TEST_P(stream_link_test, the_reader_hears_when_the_other_side_closes) {
  linked_pair p(shared());
  p.a->send(message_of({"before"}));
  p.run_until(1);
  p.a->close();
  p.run_until(2);
  EXPECT_TRUE(p.b_closed);
  EXPECT_TRUE(p.closed);
  EXPECT_EQ(p.received.size(), 1u);
}

TEST_P(stream_link_test, the_limit_counts_every_part_and_can_be_raised_once_the_peer_is_proven) {
  linked_pair p(shared(), 8);
  p.a->send(message_of({"1234", "5678"}));  // exactly the limit
  p.run_until(1);
  ASSERT_EQ(p.received.size(), 1u);
  p.b->reader().set_max_message_bytes(1 << 20);
  p.a->send(message_of({std::string(1000, 'z')}));
  p.run_until(2);
  ASSERT_EQ(p.received.size(), 2u);
  EXPECT_EQ(p.received[1][0].size(), 1000u);
  p.b->reader().set_max_message_bytes(8);
  p.a->send(message_of({"12345", "6789"}));  // one byte over
  p.run_until(3);
  EXPECT_TRUE(p.b_closed);
  EXPECT_EQ(p.closed, fiber::errc::message_too_large);
  EXPECT_EQ(p.received.size(), 2u);
}

TEST_P(stream_link_test, a_send_to_a_closed_peer_fails_and_leaves_the_message_as_it_was) {
  linked_pair p(shared());
  p.b->close();
  auto m = message_of({"header", "payload"});
  EXPECT_TRUE(p.a->send(std::move(m)));
  EXPECT_EQ(texts(m), (std::vector<std::string>{"header", "payload"}));  // the caller still has it
  EXPECT_TRUE(p.a->send(message_of({"later"})));                         // and the link stays broken
}

TEST_P(stream_link_test, flush_writes_what_send_queued_before_the_link_closes) {
  // The reader runs on a thread of its own, as the master does while a worker exits.
  asio::io_context writer_io, reader_io;
  asio::local::stream_protocol::socket sa(writer_io), sb(reader_io);
  asio::local::connect_pair(sa, sb);
  auto a = std::make_shared<stream_link>(std::move(sa), std::size_t{1} << 30);
  auto b = std::make_shared<stream_link>(std::move(sb), std::size_t{1} << 30);
  if (shared()) share(a, writer_io, b, reader_io);
  std::vector<multipart> received;
  bool closed = false;
  b->start([&](multipart m) { received.push_back(std::move(m)); }, [&](std::error_code) { closed = true; });
  std::thread reader([&] { reader_io.run(); });
  std::string big(16 << 20, 'q');
  ASSERT_FALSE(a->send(message_of({"results", big})));  // far more than the socket holds: queued
  ASSERT_FALSE(a->send(message_of({"done"})));
  EXPECT_TRUE(a->flush(std::chrono::seconds(60)));  // a bound against a hang only
  a->close();
  reader.join();  // the reader's loop ends when it has read the close
  ASSERT_EQ(received.size(), 2u);
  EXPECT_EQ(received[0][1].size(), big.size());
  EXPECT_EQ(received[0][1].to_string(), big);
  EXPECT_EQ(texts(received[1]), std::vector<std::string>{"done"});
  EXPECT_TRUE(closed);
}

TEST_P(stream_link_test, what_the_peer_wrote_before_it_ended_is_read_before_its_end) {
  // A child that sends its last results and exits at once: they are its master's, every one.
  linked_pair p(shared());
  for (int i = 0; i < 100; ++i) p.a->send(message_of({"result", std::to_string(i)}));  // all written at once
  p.a->close();
  p.run_until(101);
  ASSERT_EQ(p.received.size(), 100u);
  EXPECT_EQ(texts(p.received[99]), (std::vector<std::string>{"result", "99"}));
  EXPECT_TRUE(p.b_closed);
}

TEST(stream_link_shared, bytes_on_the_socket_after_the_move_to_shared_memory_close_the_link) {
  // The peer's bytes come only through the ring once both moved: anything on the socket is a
  // peer that does not follow the protocol, and is not parsed.
  linked_pair p(true);
  p.a->send(message_of({"through the ring"}));
  p.run_until(1);
  ASSERT_EQ(::send(p.a->socket().native_handle(), "\x01\0\0\0", 4, MSG_NOSIGNAL), 4);
  p.run_until(2);
  EXPECT_TRUE(p.b_closed);
  EXPECT_EQ(p.closed, fiber::errc::protocol_error);
  EXPECT_EQ(p.received.size(), 1u);
}

TEST(stream_link_shared, a_blocking_send_into_a_full_ring_fails_when_the_reader_ends_meanwhile) {
  // A ring whose reader ended never drains: the sender must hear the end, not wait for room.
  linked_pair p(true);  // b never reads: its loop does not run
  std::thread ender([&] {
    // Once a's first bytes are in b's ring (at most a minute, against a hang).
    auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (!p.b->bytes_waiting() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    p.b->close();
  });
  std::string more_than_the_ring(shared_lane::link_capacity * 2, 'r');
  EXPECT_TRUE(p.a->send_blocking(message_of({more_than_the_ring})));
  ender.join();
}

TEST(stream_link_shared, a_spinning_reader_takes_messages_without_its_doorbell_and_a_sleeping_one_is_rung) {
  asio::io_context io;
  asio::local::stream_protocol::socket sa(io), sb(io);
  asio::local::connect_pair(sa, sb);
  auto a = std::make_shared<stream_link>(std::move(sa), 1 << 20);
  auto b = std::make_shared<stream_link>(std::move(sb), 1 << 20);
  auto made = shared_channel::make(shared_lane::link_capacity, false);
  ASSERT_NE(made, nullptr);
  auto joined = shared_channel::join(::dup(made->segment_fd()), ::dup(made->dialer_bell()), ::dup(made->acceptor_bell()), false);
  ASSERT_NE(joined, nullptr);
  auto lane_a = shared_lane::open(io, std::move(made));
  ASSERT_TRUE(a->use_lane(lane_a));
  ASSERT_TRUE(b->use_lane(shared_lane::open(io, std::move(joined))));
  std::vector<multipart> got;
  a->start([](multipart) {}, [](std::error_code) {});
  b->start([&](multipart m) { got.push_back(std::move(m)); }, [](std::error_code) {});
  io.poll();  // b waits for bytes: it told a to ring it
  auto& pollers = asio::use_service<fiber::detail::spin_pollers>(io);

  ASSERT_TRUE(pollers.begin());  // a spin: b polls its ring, a rings nobody
  a->send(message_of({"while b spins"}));
  EXPECT_TRUE(pollers.poll());
  pollers.sleep();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(lane_a->channel().rings(), 0u);

  a->send(message_of({"while b sleeps"}));  // no spin: b waits on its doorbell
  EXPECT_EQ(lane_a->channel().rings(), 1u);
  while (got.size() < 2 && io.run_one()) {
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(texts(got[1]), std::vector<std::string>{"while b sleeps"});
  a->close();
  b->close();
}
