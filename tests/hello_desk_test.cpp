// Where a ring member takes its links (primitives/ring/hello_desk) and the TLS over them
// (primitives/ring/sealed_link): a member of the ring is admitted with its rank and talks through
// the link; a stranger without the ring's key, junk, a rank that is not lower, and more
// connections than may wait are refused, each without holding up the desk.
#include "primitives/ring/hello_desk.hpp"

#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "run_folder.hpp"

namespace {
using fiber::detail::admitted_link;
using fiber::detail::hello_desk;
using fiber::detail::sealed_link;
using fiber::detail::tls_session;

const std::string ring_secret = "the ring's secret, 40 characters long..";

struct listeners {
  int unix_fd = -1, tcp_fd = -1;
  std::uint16_t port = 0;
  listeners() {
    unix_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_un ua{};
    ua.sun_family = AF_UNIX;
    auto name = "hello-desk-test-" + fiber_test::run_id();
    std::memcpy(ua.sun_path + 1, name.data(), name.size());
    EXPECT_EQ(::bind(unix_fd, reinterpret_cast<sockaddr*>(&ua),
                     static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())),
              0);
    ::listen(unix_fd, 256);
    tcp_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in ta{};
    ta.sin_family = AF_INET;
    ta.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof ta;
    EXPECT_EQ(::bind(tcp_fd, reinterpret_cast<sockaddr*>(&ta), sizeof ta), 0);
    ::listen(tcp_fd, 256);
    ::getsockname(tcp_fd, reinterpret_cast<sockaddr*>(&ta), &len);
    port = ntohs(ta.sin_port);
  }
  ~listeners() {
    ::close(unix_fd);
    ::close(tcp_fd);
  }
  int dial() const {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in ta{};
    ta.sin_family = AF_INET;
    ta.sin_port = htons(port);
    ta.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&ta), sizeof ta), 0);
    return fd;
  }
};

/// Steps the desk and `client` (a dialer's TLS) in turn until the desk admits or refuses.
std::vector<admitted_link> run_hello(hello_desk& desk, sealed_link& client, std::int32_t rank) {
  bool said = false;
  for (int turn = 0; turn < 1000; ++turn) {
    auto got = desk.step([](int) { return true; });
    if (!got.empty()) return got;
    if (client.handshake() == tls_session::step::failed) return {};
    if (client.handshake_done() && !said) said = client.send_some(&rank, sizeof rank) > 0;
    (void)client.flush();
    if (said && desk.waiting() == 0) return {};
    std::vector<pollfd> pf;
    desk.want(pf);
    pf.push_back({client.fd(), client.wanted_events(), 0});
    ::poll(pf.data(), pf.size(), 1000);  // a bound against a hang only
  }
  return {};
}
}  // namespace

TEST(hello_desk, a_member_with_the_rings_key_is_admitted_and_its_link_carries_bytes_both_ways) {
  listeners l;
  hello_desk desk(l.unix_fd, l.tcp_fd, ring_secret, 3);
  int fd = l.dial();
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  sealed_link client(fd, tls_session::role::client, sealed_link::key_for_ring(ring_secret));
  auto admitted = run_hello(desk, client, 1);
  ASSERT_EQ(admitted.size(), 1u);
  EXPECT_EQ(admitted[0].rank, 1);
  ASSERT_TRUE(admitted[0].tls);
  auto& server = *admitted[0].tls;
  // A megabyte each way, as the mesh moves it: whatever each side takes, until all has arrived.
  std::string up(1 << 20, 'u'), down(1 << 20, 'd'), got_up(up.size(), 0), got_down(down.size(), 0);
  std::size_t sent_up = 0, sent_down = 0, in_up = 0, in_down = 0;
  for (int turn = 0; turn < 100000 && (in_up < up.size() || in_down < down.size()); ++turn) {
    if (sent_up < up.size()) sent_up += static_cast<std::size_t>(std::max(0L, client.send_some(up.data() + sent_up, up.size() - sent_up)));
    if (sent_down < down.size())
      sent_down += static_cast<std::size_t>(std::max(0L, server.send_some(down.data() + sent_down, down.size() - sent_down)));
    client.flush();
    server.flush();
    auto a = server.recv_some(got_up.data() + in_up, got_up.size() - in_up);
    auto b = client.recv_some(got_down.data() + in_down, got_down.size() - in_down);
    ASSERT_GE(a, 0) << server.why();
    ASSERT_GE(b, 0) << client.why();
    in_up += static_cast<std::size_t>(a);
    in_down += static_cast<std::size_t>(b);
  }
  EXPECT_EQ(got_up, up);
  EXPECT_EQ(got_down, down);
  ::close(admitted[0].fd);
  ::close(fd);
}

TEST(hello_desk, a_peer_without_the_rings_key_is_refused) {
  listeners l;
  hello_desk desk(l.unix_fd, l.tcp_fd, ring_secret, 3);
  int fd = l.dial();
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  sealed_link stranger(fd, tls_session::role::client, sealed_link::key_for_ring("another ring's secret"));
  EXPECT_TRUE(run_hello(desk, stranger, 1).empty());
  EXPECT_EQ(desk.waiting(), 0u);
  ::close(fd);
}

TEST(hello_desk, a_rank_that_is_not_lower_is_refused) {
  listeners l;
  hello_desk desk(l.unix_fd, l.tcp_fd, ring_secret, 3);
  for (std::int32_t rank : {3, 7, -1}) {
    int fd = l.dial();
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    sealed_link client(fd, tls_session::role::client, sealed_link::key_for_ring(ring_secret));
    EXPECT_TRUE(run_hello(desk, client, rank).empty()) << rank;
    ::close(fd);
  }
}

TEST(hello_desk, junk_is_dropped_and_at_most_most_waiting_hellos_wait) {
  listeners l;
  hello_desk desk(l.unix_fd, l.tcp_fd, ring_secret, 3);
  int junk = l.dial();
  ASSERT_EQ(::send(junk, "GET / HTTP/1.1\r\n\r\n", 18, 0), 18);
  std::vector<int> silent;
  for (std::size_t i = 0; i < hello_desk::most_waiting + 20; ++i) silent.push_back(l.dial());
  (void)desk.step([](int) { return true; });
  // The junk and 63 silent ones were taken; the junk fails its handshake and goes.
  EXPECT_EQ(desk.waiting(), hello_desk::most_waiting - 1);
  // The ones turned away were closed: reading them ends at once.
  std::size_t closed = 0;
  for (int fd : silent) {
    pollfd p{fd, POLLIN, 0};
    char byte;
    if (::poll(&p, 1, 0) == 1 && ::recv(fd, &byte, 1, MSG_DONTWAIT) <= 0) ++closed;
  }
  EXPECT_EQ(closed, 21u);  // the ones beyond the limit
  for (int fd : silent) ::close(fd);
  ::close(junk);
}
