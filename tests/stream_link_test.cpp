// The direct link between a master and its local children: multipart messages over a unix stream
// socket, in order, whole, whatever their sizes and however the bytes arrive.
#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <asio/local/connect_pair.hpp>
#include <asio/write.hpp>
#include <thread>

#include "fiber/error.hpp"
#include "transport/stream_link.hpp"

using fiber::detail::multipart;
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

struct linked_pair {
  asio::io_context io;
  std::shared_ptr<stream_link> a, b;
  std::vector<multipart> received;  // by b
  std::error_code closed;  // why b's reading ended
  bool b_closed = false;

  explicit linked_pair(std::size_t limit = std::size_t{1} << 30) {
    asio::local::stream_protocol::socket sa(io), sb(io);
    asio::local::connect_pair(sa, sb);
    a = std::make_shared<stream_link>(std::move(sa), limit);
    b = std::make_shared<stream_link>(std::move(sb), limit);
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

TEST(stream_link, messages_arrive_whole_and_in_order) {
  linked_pair p;
  p.a->send(message_of({"header", "", "a third part"}));
  p.a->send(message_of({}));
  p.a->send(message_of({"x"}));
  p.run_until(3);
  ASSERT_EQ(p.received.size(), 3u);
  EXPECT_EQ(texts(p.received[0]), (std::vector<std::string>{"header", "", "a third part"}));
  EXPECT_TRUE(p.received[1].empty());
  EXPECT_EQ(texts(p.received[2]), std::vector<std::string>{"x"});
}

TEST(stream_link, a_coalescing_link_writes_what_one_turn_sent_at_once_and_in_order) {
  linked_pair p;
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

TEST(stream_link, large_messages_larger_than_the_socket_buffer_from_both_kinds_of_send) {
  linked_pair p;
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

TEST(stream_link, the_reader_hears_when_the_other_side_closes) {
  linked_pair p;
  p.a->send(message_of({"before"}));
  p.run_until(1);
  p.a->close();
  p.run_until(2);
  EXPECT_TRUE(p.b_closed);
  EXPECT_TRUE(p.closed);
  EXPECT_EQ(p.received.size(), 1u);
}

TEST(stream_link, the_limit_counts_every_part_and_can_be_raised_once_the_peer_is_proven) {
  linked_pair p(8);
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

TEST(stream_link, a_send_to_a_closed_peer_fails_and_leaves_the_message_as_it_was) {
  linked_pair p;
  p.b->close();
  auto m = message_of({"header", "payload"});
  EXPECT_TRUE(p.a->send(std::move(m)));
  EXPECT_EQ(texts(m), (std::vector<std::string>{"header", "payload"}));  // the caller still has it
  EXPECT_TRUE(p.a->send(message_of({"later"})));                         // and the link stays broken
}

TEST(stream_link, flush_writes_what_send_queued_before_the_link_closes) {
  // The reader runs on a thread of its own, as the master does while a worker exits.
  asio::io_context writer_io, reader_io;
  asio::local::stream_protocol::socket sa(writer_io), sb(reader_io);
  asio::local::connect_pair(sa, sb);
  auto a = std::make_shared<stream_link>(std::move(sa), std::size_t{1} << 30);
  auto b = std::make_shared<stream_link>(std::move(sb), std::size_t{1} << 30);
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
