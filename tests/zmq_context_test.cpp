// A ZeroMQ context made on first use (transport/zmq_context): none until a socket asks, one for
// every asker after, and none made by ending one that was never made.
#include "transport/zmq_context.hpp"

#include <dirent.h>

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

using namespace fiber::detail;

namespace {
/// How many descriptors this process has open: a made context holds its mailbox's.
int open_descriptors() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (auto* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n;
}
}  // namespace

TEST(zmq_context, nothing_is_made_until_a_socket_asks) {
  int before = open_descriptors();
  {
    zmq_context ctx;
    EXPECT_FALSE(ctx.made());
    EXPECT_EQ(open_descriptors(), before);  // no mailbox, no eventfd
    ctx.close();
    EXPECT_FALSE(ctx.made());
  }
  EXPECT_EQ(open_descriptors(), before);
}

TEST(zmq_context, the_first_ask_makes_it_and_every_ask_gets_the_same) {
  zmq_context ctx;
  auto& first = ctx.get();
  EXPECT_TRUE(ctx.made());
  EXPECT_EQ(&ctx.get(), &first);

  // Sockets of it talk to each other, as on any context.
  zmq::socket_t a(ctx.get(), zmq::socket_type::pair), b(ctx.get(), zmq::socket_type::pair);
  a.bind("inproc://zmq_context_test");
  b.connect("inproc://zmq_context_test");
  ASSERT_TRUE(a.send(zmq::str_buffer("hello"), zmq::send_flags::none));
  zmq::message_t m;
  ASSERT_TRUE(b.recv(m, zmq::recv_flags::none));
  EXPECT_EQ(m.to_string(), "hello");
  a.close();
  b.close();
  ctx.close();
}

TEST(zmq_context, threads_asking_at_once_share_one) {
  zmq_context ctx;
  std::vector<zmq::context_t*> seen(8);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < seen.size(); ++i) threads.emplace_back([&, i] { seen[i] = &ctx.get(); });
  for (auto& t : threads) t.join();
  for (auto* p : seen) EXPECT_EQ(p, seen.front());
}

TEST(zmq_context, a_closed_context_refuses_new_sockets_with_zeromqs_own_error) {
  zmq_context ctx;
  (void)ctx.get();
  ctx.close();
  EXPECT_FALSE(ctx.made());
  try {
    (void)ctx.get();
    FAIL() << "a closed context gave a context";
  } catch (const zmq::error_t& e) {
    EXPECT_EQ(e.num(), ETERM) << e.what();
  }
}
