// A durable pool's word to its workers of what its journal holds on disk
// (primitives/pool/journal_acks): each worker is told, once a sync covers them, the last of its
// tasks journaled before the offset made durable, once, and whether what it held of the last
// masters' tasks is in too; a worker that ended is told nothing.
#include "primitives/pool/journal_acks.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

namespace {
using fiber::detail::journal_acks;
using told = std::tuple<std::string, std::uint64_t, bool>;

struct recorder {
  std::vector<told> said;
  journal_acks acks{[this](const std::string& w, std::uint64_t task, bool old) { said.emplace_back(w, task, old); }};
};

TEST(journal_acks, a_worker_is_told_the_last_of_its_tasks_a_sync_covers_and_nothing_twice) {
  recorder r;
  r.acks.journaled("w1", 1, 100, true);
  r.acks.journaled("w1", 2, 200, true);
  r.acks.journaled("w1", 3, 300, true);
  r.acks.durable(50);
  EXPECT_TRUE(r.said.empty()) << "nothing of it was durable";
  r.acks.durable(250);
  ASSERT_EQ(r.said.size(), 1u);
  EXPECT_EQ(r.said[0], told("w1", 2, true));
  r.acks.durable(250);
  EXPECT_EQ(r.said.size(), 1u) << "told again of what it was told";
  r.acks.durable(300);
  ASSERT_EQ(r.said.size(), 2u);
  EXPECT_EQ(r.said[1], told("w1", 3, true));
}

TEST(journal_acks, workers_are_told_apart_and_one_that_ended_is_not_told) {
  recorder r;
  r.acks.journaled("w1", 4, 100, true);
  r.acks.journaled("w2", 5, 120, true);
  r.acks.journaled("w3", 6, 130, true);
  r.acks.forget("w3");
  r.acks.durable(1000);
  ASSERT_EQ(r.said.size(), 2u);
  std::sort(r.said.begin(), r.said.end());
  EXPECT_EQ(r.said[0], told("w1", 4, true));
  EXPECT_EQ(r.said[1], told("w2", 5, true));
}

TEST(journal_acks, what_a_worker_held_of_the_last_masters_is_let_go_only_once_this_master_journaled_it) {
  recorder r;
  // Taken up with claims on the last master's tasks: its first task of this master ends before
  // they are read, its second after.
  r.acks.journaled("w1", 1, 100, false);
  r.acks.journaled("w1", 2, 300, true);
  r.acks.durable(200);
  ASSERT_EQ(r.said.size(), 1u);
  EXPECT_EQ(r.said[0], told("w1", 1, false));
  r.acks.durable(300);
  ASSERT_EQ(r.said.size(), 2u);
  EXPECT_EQ(r.said[1], told("w1", 2, true));
}

}  // namespace
