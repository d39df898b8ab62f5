// fiber::ring: ranked members on the configured backend meeting through the master's store; a
// member that fails ends the others' waits with member_lost and the ring's join reports it.
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "support.hpp"

namespace {
void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

// Every member publishes its pid, host and place on its host; rank 0 checks that the members of
// each host are numbered 0..k-1 there, each knowing k.
void meet(fiber::ring_member& me) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  auto mine = std::to_string(me.rank());
  me.set("pid/" + mine, std::to_string(::getpid())).get();
  me.set("host/" + mine, host).get();
  me.set("local/" + mine, std::to_string(me.local_rank()) + "," + std::to_string(me.local_size())).get();
  if (me.rank() != 0) return;
  std::map<std::string, std::set<int>> ranks_on;
  std::map<std::string, std::set<int>> sizes_on;
  for (int r = 0; r < me.size(); ++r) {
    auto rank = std::to_string(r);
    check(!me.get("pid/" + rank).get().empty(), "no pid for rank " + rank);
    auto local = me.get("local/" + rank).get();
    auto comma = local.find(',');
    auto on = me.get("host/" + rank).get();
    ranks_on[on].insert(std::stoi(local.substr(0, comma)));
    sizes_on[on].insert(std::stoi(local.substr(comma + 1)));
  }
  for (auto& [on, ranks] : ranks_on) {
    int k = static_cast<int>(ranks.size());
    check(sizes_on[on] == std::set<int>{k}, "local sizes on " + on + " are not all " + std::to_string(k));
    check(*ranks.begin() == 0 && *ranks.rbegin() == k - 1, "local ranks on " + on + " are not 0.." + std::to_string(k - 1));
  }
}

// Each add returns a sum no other member got: tickets 1..size.
void take_tickets(fiber::ring_member& me) {
  auto ticket = me.add("tickets", 1).get();
  check(ticket >= 1 && ticket <= me.size(), "ticket " + std::to_string(ticket));
  me.set("ticket/" + std::to_string(ticket), std::to_string(me.rank())).get();
  if (me.rank() == 0)
    for (int t = 1; t <= me.size(); ++t) me.get("ticket/" + std::to_string(t), std::chrono::seconds(60)).get();
}

// Rank 1 fails at once; the others wait for a key nobody sets and must hear member_lost.
void one_fails(fiber::ring_member& me) {
  if (me.rank() == 1) throw std::runtime_error("rank 1 gives up");
  try {
    me.get("never", std::chrono::seconds(120)).get();  // a bound against a hang only
  } catch (const fiber::error& e) {
    if (e.code() == fiber::errc::member_lost) return;
    throw;
  }
  throw std::runtime_error("a key nobody set was found");
}

void waits_alone(fiber::ring_member& me) {
  try {
    me.get("nobody sets this", std::chrono::milliseconds(200)).get();
  } catch (const fiber::error& e) {
    check(e.code() == fiber::errc::timeout, std::string("expected a timeout, got ") + e.what());
    return;
  }
  throw std::runtime_error("a key nobody set was found");
}

void unregistered(fiber::ring_member&) {}
}  // namespace
FIBER_REMOTE(meet);
FIBER_REMOTE(take_tickets);
FIBER_REMOTE(one_fails);
FIBER_REMOTE(waits_alone);

TEST(ring, members_know_their_ranks_and_meet_through_the_store) {
  fiber::ring r(3, &meet);
  EXPECT_EQ(r.size(), 3);
  r.start().get();
  for (int pid : r.pids()) EXPECT_GT(pid, 0);
  r.join().get();
  for (auto& code : r.exitcodes()) EXPECT_EQ(code, 0);
}

TEST(ring, adds_hand_out_distinct_sums) {
  fiber::ring r(4, &take_tickets);
  r.start().get();
  r.join().get();
  for (auto& code : r.exitcodes()) EXPECT_EQ(code, 0);
}

TEST(ring, a_failing_member_ends_the_others_waits_with_member_lost_and_join_names_it) {
  fiber::ring r(3, &one_fails);
  r.start().get();
  fiber_test::expect_error([&] { r.join().get(); }, fiber::errc::member_lost, "ring member 1");
  auto codes = r.exitcodes();
  EXPECT_EQ(codes[0], 0);  // each heard member_lost
  EXPECT_EQ(codes[1], 1);
  EXPECT_EQ(codes[2], 0);
}

TEST(ring, a_get_nobody_answers_times_out) {
  fiber::ring r(1, &waits_alone);
  r.start().get();
  r.join().get();
  EXPECT_EQ(r.exitcodes()[0], 0);
}

TEST(ring, bad_input_fails_at_once) {
  fiber_test::expect_error([] { fiber::ring(0, &meet); }, fiber::errc::config_error, "at least one member");
  fiber_test::expect_error([] { fiber::ring(2, &unregistered); }, fiber::errc::not_registered, "FIBER_REMOTE");
  fiber::ring r(1, &meet);
  fiber_test::expect_error([&] { r.join().get(); }, fiber::errc::not_started, "before start");
}
