// What a spinning caller polls beside its io_context: each live poller told that the spin began,
// polled, and told before the loop sleeps that the spin is over (not between two spins); a poller
// that died is dropped, and no more than most_polled are.
#include "transport/spin_pollers.hpp"

#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <memory>
#include <vector>

using fiber::detail::spin_pollers;

namespace {
struct counting : spin_pollers::poller {
  int awake_calls = 0, polls = 0, asleep_calls = 0;
  bool has_work = false;
  void awake() noexcept override { ++awake_calls; }
  bool poll() override {
    ++polls;
    return std::exchange(has_work, false);
  }
  void asleep() noexcept override { ++asleep_calls; }
};
}  // namespace

TEST(spin_pollers, a_spin_tells_each_poller_it_began_polls_it_and_tells_it_before_the_loop_sleeps) {
  asio::io_context io;
  auto& pollers = asio::use_service<spin_pollers>(io);
  EXPECT_FALSE(pollers.begin()) << "nothing to poll";
  pollers.sleep();
  auto a = std::make_shared<counting>(), b = std::make_shared<counting>();
  pollers.add(a);
  pollers.add(b);
  ASSERT_TRUE(pollers.begin());
  EXPECT_FALSE(pollers.poll());
  b->has_work = true;
  EXPECT_TRUE(pollers.poll()) << "b ran something";
  EXPECT_TRUE(pollers.awake());
  ASSERT_TRUE(pollers.begin()) << "a second spin before the loop slept: still awake";
  pollers.poll();
  EXPECT_EQ(a->awake_calls, 1);
  EXPECT_EQ(a->asleep_calls, 0);
  pollers.sleep();
  EXPECT_FALSE(pollers.awake());
  for (auto* p : {a.get(), b.get()}) {
    EXPECT_EQ(p->awake_calls, 1);
    EXPECT_EQ(p->polls, 3);
    EXPECT_EQ(p->asleep_calls, 1);
  }
}

TEST(spin_pollers, a_poller_that_died_is_not_polled_and_one_added_during_a_spin_waits_for_the_next) {
  asio::io_context io;
  auto& pollers = asio::use_service<spin_pollers>(io);
  auto kept = std::make_shared<counting>();
  pollers.add(kept);
  {
    auto gone = std::make_shared<counting>();
    pollers.add(gone);
  }
  ASSERT_TRUE(pollers.begin());
  auto late = std::make_shared<counting>();
  pollers.add(late);  // sweeps the dead one
  pollers.poll();
  pollers.sleep();
  EXPECT_EQ(pollers.size(), 2u);
  EXPECT_EQ(kept->polls, 1);
  EXPECT_EQ(late->awake_calls, 0);
  EXPECT_EQ(late->polls, 0);
  ASSERT_TRUE(pollers.begin());
  pollers.poll();
  pollers.sleep();
  EXPECT_EQ(late->polls, 1);
}

TEST(spin_pollers, a_spin_polls_the_first_most_polled_and_holds_them_until_the_loop_sleeps) {
  asio::io_context io;
  auto& pollers = asio::use_service<spin_pollers>(io);
  std::vector<std::shared_ptr<counting>> all;
  for (std::size_t i = 0; i < spin_pollers::most_polled + 3; ++i) {
    all.push_back(std::make_shared<counting>());
    pollers.add(all.back());
  }
  ASSERT_TRUE(pollers.begin());
  std::weak_ptr<counting> first = all.front();
  all.front().reset();  // its owner let go mid-spin: the spin still holds it
  pollers.poll();
  EXPECT_FALSE(first.expired());
  pollers.sleep();
  EXPECT_TRUE(first.expired()) << "let go once the loop slept";
  for (std::size_t i = 1; i < all.size(); ++i) EXPECT_EQ(all[i]->polls, i < spin_pollers::most_polled ? 1 : 0) << i;
}
