// The reading side of a direct link on its own, on a real socket pair, with bytes written raw on
// the other end as a hostile local process would write them: frames split anywhere arrive whole,
// several in one read and a large one straight into its parts; a head that declares too many
// parts, more bytes than the limit, or sizes whose sum wraps closes the link before anything is
// allocated for them or read past the data. A reader that posts its next read after one that
// emptied the socket (a worker's) still gets every message in order, and ends as a cancelled read
// when its link closes before that read runs.
#include "transport/stream_reader.hpp"

#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <asio/local/connect_pair.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/write.hpp>
#include <mutex>

#include "fiber/error.hpp"

using fiber::detail::multipart;
using fiber::detail::stream_reader;

namespace {

std::string head_of(std::uint32_t parts, std::initializer_list<std::uint64_t> sizes) {
  std::string h(reinterpret_cast<const char*>(&parts), sizeof parts);
  for (auto s : sizes) h.append(reinterpret_cast<const char*>(&s), sizeof s);
  return h;
}

/// One part, `body`, framed.
std::string small_message(const std::string& body) { return head_of(1, {body.size()}) + body; }

/// A reader on one end of a socket pair; the test writes raw bytes on the other.
struct raw_peer {
  asio::io_context io;
  asio::local::stream_protocol::socket writer{io};
  stream_reader::socket_type socket{io};
  std::recursive_mutex mutex;
  std::shared_ptr<stream_reader> reader;
  std::vector<multipart> received;
  std::error_code closed;
  bool ended = false;

  /// `defer`: the reader posts its next read after one that emptied the socket.
  explicit raw_peer(std::size_t limit, bool defer = false) {
    asio::local::stream_protocol::socket mine(io);
    asio::local::connect_pair(writer, mine);
    socket = stream_reader::socket_type(io, asio::generic::stream_protocol(AF_UNIX, SOCK_STREAM), mine.release());
    reader = std::make_shared<stream_reader>(socket, nullptr, mutex, limit, [this] { socket.close(); });
    if (defer) reader->defer_after_drain();
    reader->start(reader, [this](multipart m) { received.push_back(std::move(m)); },
                  [this](std::error_code ec) {
                    closed = ec;
                    ended = true;
                  });
  }
  void write(const std::string& bytes) { asio::write(writer, asio::buffer(bytes)); }
  void run_until(std::size_t messages) {
    while (received.size() < messages && !ended && io.run_one()) {
    }
  }
};

}  // namespace

TEST(stream_reader, frames_split_anywhere_arrive_whole_and_several_come_from_one_read) {
  raw_peer p(1 << 20);
  auto frames = head_of(2, {3, 0}) + "abc" + head_of(1, {5}) + "hello";
  p.write(frames.substr(0, 7));  // inside the first head
  p.write(frames.substr(7));
  p.run_until(2);
  ASSERT_EQ(p.received.size(), 2u);
  EXPECT_EQ(p.received[0][0].to_string(), "abc");
  EXPECT_EQ(p.received[0][1].size(), 0u);
  EXPECT_EQ(p.received[1][0].to_string(), "hello");
}

TEST(stream_reader, a_large_message_is_read_into_its_parts) {
  raw_peer p(1 << 24);
  std::string big(3 * stream_reader::buffer_bytes + 7, 'q');
  p.write(head_of(2, {big.size(), 1}) + big + "!");
  p.run_until(1);
  ASSERT_EQ(p.received.size(), 1u);
  EXPECT_EQ(p.received[0][0].size(), big.size());
  EXPECT_EQ(p.received[0][1].to_string(), "!");
}

TEST(stream_reader, part_sizes_whose_sum_wraps_close_the_link_without_reading_past_the_data) {
  // Two parts of 2^63 + 14 bytes each sum (mod 2^64) to 28: a check of the sum alone passes for
  // the 28 bytes that follow, and the copy of the first part runs far past them.
  raw_peer p(1 << 20);
  const std::uint64_t huge = (std::uint64_t{1} << 63) + 14;
  p.write(head_of(2, {huge, huge}) + std::string(28, 'x'));
  p.run_until(1);
  EXPECT_TRUE(p.ended);
  EXPECT_EQ(p.closed, fiber::errc::message_too_large);
  EXPECT_TRUE(p.received.empty());
}

TEST(stream_reader, a_message_over_the_limit_closes_the_link_as_soon_as_its_head_arrives) {
  raw_peer p(64);
  p.write(head_of(1, {std::uint64_t{2} << 30}));  // 2 GiB announced, nothing sent
  p.run_until(1);
  EXPECT_TRUE(p.ended);
  EXPECT_EQ(p.closed, fiber::errc::message_too_large);
  EXPECT_TRUE(p.received.empty());
  EXPECT_FALSE(p.socket.is_open());
}

TEST(stream_reader, a_head_with_too_many_parts_is_malformed) {
  raw_peer p(1 << 20);
  p.write(head_of(stream_reader::max_parts + 1, {}));
  p.run_until(1);
  EXPECT_TRUE(p.ended);
  EXPECT_EQ(p.closed, fiber::errc::malformed_message);
}

TEST(stream_reader, a_reader_that_posts_its_next_read_gets_every_message_in_order) {
  raw_peer p(1024, /*defer=*/true);
  p.write(small_message("one"));
  p.run_until(1);
  p.write(small_message("two"));
  p.write(small_message("three"));
  p.run_until(3);
  ASSERT_EQ(p.received.size(), 3u);
  EXPECT_EQ(p.received[0][0].to_string(), "one");
  EXPECT_EQ(p.received[1][0].to_string(), "two");
  EXPECT_EQ(p.received[2][0].to_string(), "three");
  EXPECT_FALSE(p.ended);
}

TEST(stream_reader, a_link_closed_while_its_posted_read_waits_ends_as_one_whose_read_was_cancelled) {
  raw_peer p(1024, /*defer=*/true);
  p.write(small_message("one"));
  p.run_until(1);  // the handler that delivered it posted the next read, which has not run
  ASSERT_EQ(p.received.size(), 1u);
  p.socket.close();
  while (!p.ended && p.io.run_one()) {
  }
  EXPECT_TRUE(p.ended);
  EXPECT_EQ(p.closed, asio::error::operation_aborted);  // as a read under way when it closed
}
