// The ZeroMQ-on-Asio channel: receive as an Asio async operation, cancellation, edge handling.
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>
#include <gtest/gtest.h>
#include <poll.h>

#include "transport/zmq_channel.hpp"

using fiber::detail::multipart;
using fiber::detail::zmq_channel;

namespace {
struct pair_of_channels {
  asio::io_context io;
  zmq::context_t zctx;
  std::shared_ptr<zmq_channel> a, b;
  pair_of_channels() {
    zmq::socket_t sa(zctx, zmq::socket_type::pair), sb(zctx, zmq::socket_type::pair);
    sa.bind("inproc://channel-test");
    sb.connect("inproc://channel-test");
    a = std::make_shared<zmq_channel>(io, std::move(sa));
    b = std::make_shared<zmq_channel>(io, std::move(sb));
  }
  ~pair_of_channels() {
    a->close();
    b->close();
  }
};
multipart text(std::string_view s) {
  multipart m;
  m.emplace_back(s);
  return m;
}
}  // namespace

TEST(zmq_channel, receive_completes_after_a_later_send) {
  pair_of_channels p;
  std::string got;
  p.b->async_receive([&](std::error_code ec, multipart m) {
    ASSERT_FALSE(ec);
    got = m.at(0).to_string();
  });
  p.io.poll();  // the receive is parked now
  EXPECT_TRUE(got.empty());
  ASSERT_FALSE(p.a->send(text("ping")));
  p.io.run_one();
  while (got.empty() && p.io.run_one()) {
  }
  EXPECT_EQ(got, "ping");
}

TEST(zmq_channel, completion_is_never_inline) {
  pair_of_channels p;
  ASSERT_FALSE(p.a->send(text("ready")));
  bool called = false;
  p.b->async_receive([&](std::error_code, multipart) { called = true; });
  EXPECT_FALSE(called);  // even though a message was already there
  while (!called && p.io.run_one()) {
  }
  EXPECT_TRUE(called);
}

TEST(zmq_channel, multipart_messages_stay_whole_and_ordered) {
  pair_of_channels p;
  for (int i = 0; i < 100; ++i) {
    multipart m;
    m.emplace_back(std::to_string(i));
    m.emplace_back(std::string_view("tail"));
    ASSERT_FALSE(p.a->send(std::move(m)));
  }
  std::vector<std::string> got;
  asio::co_spawn(
      p.io,
      [](std::shared_ptr<zmq_channel> b, std::vector<std::string>& out) -> asio::awaitable<void> {
        for (int i = 0; i < 100; ++i) {
          auto m = co_await b->async_receive(asio::use_awaitable);
          EXPECT_EQ(m.size(), 2u);
          out.push_back(m[0].to_string());
        }
      }(p.b, got),
      asio::detached);
  p.io.run();
  ASSERT_EQ(got.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(got[i], std::to_string(i));
}

TEST(zmq_channel, per_operation_cancellation) {
  pair_of_channels p;
  asio::cancellation_signal cancel;
  std::error_code result;
  bool done = false;
  p.b->async_receive(asio::bind_cancellation_slot(cancel.slot(), [&](std::error_code ec, multipart) {
    result = ec;
    done = true;
  }));
  p.io.poll();
  EXPECT_FALSE(done);
  cancel.emit(asio::cancellation_type::terminal);
  while (!done && p.io.run_one()) {
  }
  EXPECT_EQ(result, asio::error::operation_aborted);

  // The channel still works after a cancelled receive.
  ASSERT_FALSE(p.a->send(text("after")));
  std::string got;
  p.b->async_receive([&](std::error_code, multipart m) { got = m.at(0).to_string(); });
  while (got.empty() && p.io.run_one()) {
  }
  EXPECT_EQ(got, "after");
}

TEST(zmq_channel, send_on_a_socket_with_a_parked_receive_does_not_lose_the_wakeup) {
  // Both directions on the same sockets: every send may consume the edge of ZMQ_FD.
  pair_of_channels p;
  int rounds = 0;
  std::function<void()> a_side, b_side;
  b_side = [&] {
    p.b->async_receive([&](std::error_code ec, multipart m) {
      if (ec) return;  // closed at the end
      (void)p.b->send(std::move(m));
      b_side();
    });
  };
  a_side = [&] {
    p.a->async_receive([&](std::error_code ec, multipart m) {
      ASSERT_FALSE(ec);
      if (++rounds < 2000) {
        (void)p.a->send(std::move(m));
        a_side();
      } else {
        p.a->close();
        p.b->close();
      }
    });
  };
  b_side();
  a_side();
  ASSERT_FALSE(p.a->send(text("x")));
  p.io.run();
  EXPECT_EQ(rounds, 2000);
}

namespace {
multipart three_parts_one_large(std::size_t large) {
  multipart m;
  m.emplace_back(std::string_view("head"));
  std::string big(large, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + i / 7);
  m.emplace_back(big);
  m.emplace_back(std::string_view("tail"));
  return m;
}
}  // namespace

TEST(zmq_channel, a_part_larger_than_a_frame_travels_in_pieces_and_arrives_whole) {
  pair_of_channels p;
  const std::size_t large = 3 * fiber::detail::max_frame_bytes + 5;
  ASSERT_FALSE(p.a->send(three_parts_one_large(large)));
  multipart got;
  bool done = false;
  p.b->async_receive([&](std::error_code ec, multipart m) {
    ASSERT_FALSE(ec);
    got = std::move(m);
    done = true;
  });
  while (!done && p.io.run_one()) {
  }
  auto expected = three_parts_one_large(large);
  ASSERT_EQ(got.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(got[i].to_string(), expected[i].to_string()) << "part " << i;

  // On the wire, no frame is larger than max_frame_bytes: a raw peer sees the pieces.
  zmq::context_t zctx;
  zmq::socket_t raw(zctx, zmq::socket_type::pair);
  raw.bind("inproc://raw-peer");
  zmq::socket_t s(zctx, zmq::socket_type::pair);
  s.connect("inproc://raw-peer");
  auto sender = std::make_shared<zmq_channel>(p.io, std::move(s));
  ASSERT_FALSE(sender->send(three_parts_one_large(large)));
  std::size_t frames = 0, largest = 0;
  for (bool more = true; more;) {
    zmq::message_t m;
    ASSERT_TRUE(raw.recv(m));
    ++frames;
    largest = std::max(largest, m.size());
    more = m.more();
  }
  EXPECT_LE(largest, fiber::detail::max_frame_bytes);
  EXPECT_EQ(frames, 1u + 1 + 4 + 1);  // layout, head, four pieces, tail
  sender->close();
}

TEST(zmq_channel, a_send_to_a_gone_peer_leaves_the_parts_as_they_came) {
  // Callers keep what a failed send refused (the pool resends a chunk to another worker).
  asio::io_context io;
  zmq::context_t zctx;
  zmq::socket_t router(zctx, zmq::socket_type::router);
  router.set(zmq::sockopt::router_mandatory, 1);
  router.bind("inproc://gone-peer");
  auto channel = std::make_shared<zmq_channel>(io, std::move(router));
  for (std::size_t large : {std::size_t{10}, 2 * fiber::detail::max_frame_bytes + 1}) {
    auto parts = three_parts_one_large(large);
    parts.insert(parts.begin(), zmq::message_t(std::string_view("nobody")));
    auto ec = channel->send(std::move(parts));
    EXPECT_EQ(ec, std::error_code(EHOSTUNREACH, std::generic_category())) << large;
    auto expected = three_parts_one_large(large);
    ASSERT_EQ(parts.size(), 4u) << large;
    EXPECT_EQ(parts[0].to_string(), "nobody");
    for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(parts[i + 1].to_string(), expected[i].to_string()) << large;
  }
  channel->close();
}

namespace {
/// Frames a raw socket receives for the next message.
std::vector<std::string> raw_frames(zmq::socket_t& raw) {
  std::vector<std::string> frames;
  for (bool more = true; more;) {
    zmq::message_t m;
    if (!raw.recv(m)) break;
    frames.push_back(m.to_string());
    more = m.more();
  }
  return frames;
}
}  // namespace

TEST(zmq_channel, a_small_message_of_several_parts_travels_as_one_frame_and_arrives_in_its_parts) {
  // ZeroMQ and CURVE pay per frame; a pool's task is three parts, its result two.
  asio::io_context io;
  zmq::context_t zctx;
  zmq::socket_t router(zctx, zmq::socket_type::router), dealer(zctx, zmq::socket_type::dealer);
  router.set(zmq::sockopt::router_mandatory, 1);
  router.bind("inproc://packed");
  dealer.set(zmq::sockopt::routing_id, "worker");
  dealer.connect("inproc://packed");
  auto master = std::make_shared<zmq_channel>(io, std::move(router));
  auto worker = std::make_shared<zmq_channel>(io, std::move(dealer));
  auto parts = [](std::size_t middle) {
    multipart m;
    m.emplace_back(std::string_view("head"));
    m.emplace_back(std::string(middle, 'm'));
    m.emplace_back(std::string_view(""));  // an empty part stays a part
    return m;
  };
  // Worker to master and back, both ends channels: the parts as they were sent. The middle part
  // at the packing bound and one byte past it (then frames of their own).
  for (std::size_t middle : {std::size_t{5}, fiber::detail::max_packed_bytes - 4, fiber::detail::max_packed_bytes - 3}) {
    ASSERT_FALSE(worker->send(parts(middle)));
    multipart got;
    master->async_receive([&](std::error_code ec, multipart m) {
      EXPECT_FALSE(ec);
      got = std::move(m);
    });
    io.restart();  // a run that ran out of work stopped it
    while (got.empty() && io.run_one()) {
    }
    ASSERT_EQ(got.size(), 4u) << middle;
    EXPECT_EQ(got[0].to_string(), "worker");
    EXPECT_EQ(got[1].to_string(), "head");
    EXPECT_EQ(got[2].to_string(), std::string(middle, 'm'));
    EXPECT_EQ(got[3].size(), 0u);

    auto reply = parts(middle);
    reply.insert(reply.begin(), zmq::message_t(std::string_view("worker")));
    ASSERT_FALSE(master->send(std::move(reply)));
    got.clear();
    worker->async_receive([&](std::error_code ec, multipart m) {
      EXPECT_FALSE(ec);
      got = std::move(m);
    });
    io.restart();
    while (got.empty() && io.run_one()) {
    }
    ASSERT_EQ(got.size(), 3u) << middle;
    EXPECT_EQ(got[1].to_string(), std::string(middle, 'm'));
  }

  // On the wire: one frame at or under the bound, the parts as frames above it, and as frames
  // too from a channel told to keep them (its peer is not a channel).
  zmq::socket_t raw(zctx, zmq::socket_type::pair);
  raw.bind("inproc://packed-raw");
  zmq::socket_t s(zctx, zmq::socket_type::pair);
  s.connect("inproc://packed-raw");
  auto sender = std::make_shared<zmq_channel>(io, std::move(s));
  ASSERT_FALSE(sender->send(parts(fiber::detail::max_packed_bytes - 4)));
  auto frames = raw_frames(raw);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].substr(0, 8), std::string("\xf1" "BSPACK\x01", 8));
  ASSERT_FALSE(sender->send(parts(fiber::detail::max_packed_bytes - 3)));
  EXPECT_EQ(raw_frames(raw).size(), 3u);
  sender->keep_frames();
  ASSERT_FALSE(sender->send(parts(5)));
  EXPECT_EQ(raw_frames(raw), (std::vector<std::string>{"head", "mmmmm", ""}));
  sender->close();
  master->close();
  worker->close();
}

// A send that ZeroMQ refuses (router_mandatory: the peer is gone) reads the socket's commands as
// one it takes does, and with them the edge of a message that has arrived: the parked receive
// must still complete. (A nested master that told a dead child's news stopped hearing its own
// children: docs/design.md, "Nested processes".)
TEST(zmq_channel, a_refused_send_does_not_lose_the_wakeup_of_an_arrived_message) {
  asio::io_context io;
  zmq::context_t zctx;
  zmq::socket_t router(zctx, zmq::socket_type::router);
  router.set(zmq::sockopt::router_mandatory, 1);
  router.bind("inproc://refused-send");
  zmq::socket_t dealer(zctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::routing_id, "peer");
  dealer.connect("inproc://refused-send");
  auto channel = std::make_shared<zmq_channel>(io, std::move(router));
  int fd = channel->socket().get(zmq::sockopt::fd);

  std::vector<std::string> received;
  auto receive = [&] {
    channel->async_receive([&](std::error_code ec, multipart m) {
      ASSERT_FALSE(ec);
      received.push_back(m.back().to_string());
      if (received.size() == 2) io.stop();
    });
  };
  // The connection is made: a first message is taken.
  receive();
  (void)dealer.send(zmq::str_buffer("first"), zmq::send_flags::none);
  while (received.empty()) io.run_one();
  io.restart();  // it ran out of work
  // A receive waits; a message arrives (the socket's descriptor says so) ...
  receive();
  io.poll();
  (void)dealer.send(zmq::str_buffer("second"), zmq::send_flags::none);
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1);
  // ... and before the loop sees it, a send to a peer that is not there is refused.
  multipart to_nobody;
  to_nobody.emplace_back(std::string_view("nobody"));
  to_nobody.emplace_back(std::string_view("lost"));
  EXPECT_EQ(channel->send(std::move(to_nobody)), std::error_code(EHOSTUNREACH, std::generic_category()));
  io.run_for(std::chrono::seconds(10));  // bounded only against a hang
  EXPECT_EQ(received, (std::vector<std::string>{"first", "second"}));
  channel->close();
}
