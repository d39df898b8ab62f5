// The ring's rendezvous store on its own, on a real io_context, without a process: a read of a
// key set answers at once, one of a key not set yet waits for it (or for its timeout), add keeps
// a number, a value the ring sets itself wakes the readers, and a lost member fails every read
// that waits.
#include "primitives/ring/rendezvous_store.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace {
using fiber::errc;
using fiber::detail::rendezvous_store;
using namespace std::chrono_literals;

struct answer {
  std::string peer;
  std::uint64_t request;
  std::string value;
  errc code{};  // failures only
  std::string why;
};

struct store_fixture {
  asio::io_context io;
  std::vector<answer> answers;
  rendezvous_store store{
      io, [this](const std::string& p, std::uint64_t r, std::string_view v) { answers.push_back({p, r, std::string(v)}); },
      [this](const std::string& p, std::uint64_t r, errc c, const std::string& w) { answers.push_back({p, r, {}, c, w}); }};
};

std::int64_t number(const std::string& bytes) {
  std::int64_t n = 0;
  std::memcpy(&n, bytes.data(), sizeof n);
  return n;
}
}  // namespace

TEST(rendezvous_store, a_read_waits_for_its_key_and_a_set_key_answers_at_once) {
  store_fixture f;
  f.store.get("m1", 1, "model", 1h, nullptr);
  EXPECT_TRUE(f.answers.empty());
  EXPECT_EQ(f.store.waiting(), 1u);
  f.store.set("m0", 2, "model", "v1");
  ASSERT_EQ(f.answers.size(), 2u);
  EXPECT_EQ(f.answers[0].peer, "m0") << "the set is answered";
  EXPECT_EQ(f.answers[1].peer, "m1");
  EXPECT_EQ(f.answers[1].request, 1u);
  EXPECT_EQ(f.answers[1].value, "v1");
  f.store.get("m2", 3, "model", 1h, nullptr);
  EXPECT_EQ(f.answers.back().value, "v1");
  EXPECT_EQ(f.store.waiting(), 0u);
}

TEST(rendezvous_store, a_read_that_waits_past_its_timeout_fails_naming_the_key) {
  store_fixture f;
  f.store.get("m1", 1, "never", 0ms, nullptr);
  f.io.run();
  ASSERT_EQ(f.answers.size(), 1u);
  EXPECT_EQ(f.answers[0].code, errc::timeout);
  EXPECT_NE(f.answers[0].why.find("key 'never' was not set within 0 ms"), std::string::npos) << f.answers[0].why;
  EXPECT_EQ(f.store.waiting(), 0u);
}

TEST(rendezvous_store, add_keeps_a_number_and_refuses_a_key_that_holds_text) {
  store_fixture f;
  f.store.add("m0", 1, "done", 1);
  f.store.add("m1", 2, "done", 2);
  EXPECT_EQ(number(f.answers[1].value), 3);
  f.store.set("m0", 3, "name", "alice");
  f.store.add("m0", 4, "name", 1);
  EXPECT_EQ(f.answers.back().code, errc::malformed_message);
  EXPECT_NE(f.answers.back().why.find("not a number"), std::string::npos);
}

TEST(rendezvous_store, a_value_the_ring_sets_wakes_its_readers_and_a_new_run_starts_empty) {
  store_fixture f;
  f.store.get("m3", 1, "local/3", 1h, nullptr);
  f.store.put("local/3", "0,2");
  ASSERT_EQ(f.answers.size(), 1u);
  EXPECT_EQ(f.answers[0].value, "0,2");
  f.store.clear();
  f.store.get("m3", 2, "local/3", 1h, nullptr);
  EXPECT_EQ(f.answers.size(), 1u) << "the new run's read waits";
}

TEST(rendezvous_store, a_lost_member_fails_every_waiting_read_and_each_later_one) {
  store_fixture f;
  f.store.get("m1", 1, "a", 1h, nullptr);
  f.store.get("m2", 2, "b", 1h, nullptr);
  f.store.fail_waiting("ring member 0 was killed by signal 9");
  ASSERT_EQ(f.answers.size(), 2u);
  for (auto& a : f.answers) EXPECT_EQ(a.code, errc::member_lost);
  std::string lost = "ring member 0 was killed by signal 9";
  f.store.get("m3", 3, "c", 1h, &lost);
  EXPECT_EQ(f.answers.back().code, errc::member_lost);
  EXPECT_EQ(f.store.waiting(), 0u);
  f.io.run();  // the cancelled timers answer nothing more
  EXPECT_EQ(f.answers.size(), 3u);
}
