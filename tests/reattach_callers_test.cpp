// The dials a reattach point holds until they prove the secret (runtime/links/reattach_callers),
// over real socketpairs, the time given by the test: a caller that proves the secret is handed
// over whatever silent callers came before it, bytes in pieces or not; a wrong proof or a caller's
// end ends it; past the bound the oldest goes; a caller whose patience ran out is dropped, not one
// before.
#include "runtime/links/reattach_callers.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>

namespace {
using fiber::detail::reattach_callers;
using fiber::detail::reattach_challenge;
using namespace std::chrono_literals;

const std::string secret = "the worker's secret";
const auto t0 = reattach_callers::clock::time_point{} + 1h;

/// One dialling side: its socket (the other end is the callers'), and what it read.
struct dialler {
  int mine = -1, theirs = -1;
  dialler() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds), 0);
    mine = fds[0];
    theirs = fds[1];
  }
  ~dialler() { ::close(mine); }
  /// The challenge its greeting carried.
  reattach_challenge challenge() const {
    char hello[16 + 32];
    EXPECT_EQ(::recv(mine, hello, sizeof hello, 0), static_cast<ssize_t>(sizeof hello));
    EXPECT_EQ(std::string(hello, 16), std::string(fiber::detail::reattach_greeting));
    reattach_challenge c{};
    std::memcpy(c.data(), hello + 16, c.size());
    return c;
  }
  /// Its challenge and its proof under `key`, as the master sends them.
  std::string answer(const reattach_challenge& worker, const std::string& key, reattach_challenge& sent) const {
    sent = fiber::detail::reattach_random();
    auto proof = fiber::detail::reattach_prove(key, "master", worker, sent);
    return std::string(reinterpret_cast<const char*>(sent.data()), sent.size()) +
           std::string(reinterpret_cast<const char*>(proof.data()), proof.size());
  }
  void send(const std::string& bytes) const { EXPECT_EQ(::send(mine, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size())); }
  /// Whether the callers closed their end.
  bool ended() const {
    char c;
    for (;;) {
      auto n = ::recv(mine, &c, 1, MSG_DONTWAIT);
      if (n == 0) return true;
      if (n < 0) return false;  // nothing, but open
    }
  }
};

TEST(reattach_callers, a_caller_that_proves_the_secret_is_handed_over_whatever_came_before_it) {
  reattach_callers callers(secret, 16, 5s);
  dialler silent, master;
  callers.add(silent.theirs, t0);
  callers.add(master.theirs, t0);
  ASSERT_EQ(callers.size(), 2u);
  reattach_challenge sent{};
  auto worker = master.challenge();
  master.send(master.answer(worker, secret, sent));
  EXPECT_FALSE(callers.readable(silent.theirs)) << "a caller that said nothing was handed over";
  auto proven = callers.readable(master.theirs);
  ASSERT_TRUE(proven);
  EXPECT_EQ(proven->fd, master.theirs);
  EXPECT_EQ(proven->mine, worker);
  EXPECT_EQ(proven->theirs, sent);
  EXPECT_EQ(callers.size(), 1u) << "the proven caller is the point's now";
  ::close(proven->fd);
  EXPECT_FALSE(silent.ended());
}

TEST(reattach_callers, a_proof_that_arrives_in_pieces_is_read_to_its_end) {
  reattach_callers callers(secret, 16, 5s);
  dialler master;
  callers.add(master.theirs, t0);
  reattach_challenge sent{};
  auto bytes = master.answer(master.challenge(), secret, sent);
  for (std::size_t i = 0; i + 1 < bytes.size(); ++i) {
    master.send(bytes.substr(i, 1));
    EXPECT_FALSE(callers.readable(master.theirs)) << "handed over after " << i + 1 << " bytes";
  }
  master.send(bytes.substr(bytes.size() - 1));
  auto proven = callers.readable(master.theirs);
  ASSERT_TRUE(proven);
  ::close(proven->fd);
}

TEST(reattach_callers, a_wrong_proof_or_a_callers_end_ends_it_and_hands_nothing_over) {
  reattach_callers callers(secret, 16, 5s);
  dialler wrong, leaving;
  callers.add(wrong.theirs, t0);
  callers.add(leaving.theirs, t0);
  reattach_challenge sent{};
  wrong.send(wrong.answer(wrong.challenge(), "another secret", sent));
  EXPECT_FALSE(callers.readable(wrong.theirs));
  EXPECT_TRUE(wrong.ended());
  leaving.send("partial");
  (void)callers.readable(leaving.theirs);
  ::shutdown(leaving.mine, SHUT_WR);
  EXPECT_FALSE(callers.readable(leaving.theirs));
  EXPECT_EQ(callers.size(), 0u);
}

TEST(reattach_callers, past_the_bound_the_oldest_caller_goes) {
  reattach_callers callers(secret, 2, 5s);
  dialler first, second, third;
  callers.add(first.theirs, t0);
  callers.add(second.theirs, t0);
  callers.add(third.theirs, t0);
  EXPECT_EQ(callers.size(), 2u);
  EXPECT_TRUE(first.ended());
  EXPECT_FALSE(second.ended());
  EXPECT_FALSE(third.ended());
}

TEST(reattach_callers, a_caller_whose_patience_ran_out_is_dropped_and_not_before) {
  reattach_callers callers(secret, 16, 5s);
  dialler early, late;
  callers.add(early.theirs, t0);
  callers.add(late.theirs, t0 + 2s);
  EXPECT_EQ(callers.next_deadline(), t0 + 5s);
  callers.expire(t0 + 5s - 1ms);
  EXPECT_EQ(callers.size(), 2u);
  callers.expire(t0 + 5s);
  EXPECT_EQ(callers.size(), 1u);
  EXPECT_TRUE(early.ended());
  EXPECT_FALSE(late.ended());
  EXPECT_EQ(callers.next_deadline(), t0 + 7s);
}

}  // namespace
