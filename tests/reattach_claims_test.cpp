// A master taking a durable run up reads what the workers it linked again send of their old tasks
// (primitives/pool/reattach_claims) and what they say they hold (primitives/pool/held_results):
// a claimed chunk's task goes to its worker; a message is lined up with the items the journal
// already answered, so that no result is delivered twice and none is skipped; a message that
// comes before its task is made waits; a worker's ready ends its old tasks' messages; a worker's
// word of what it holds is read back whole or refused.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "fiber/error.hpp"
#include "primitives/pool/held_results.hpp"
#include "primitives/pool/reattach_claims.hpp"
#include "runtime/protocol.hpp"

namespace {
using fiber::detail::held_results;
using fiber::detail::held_state;
using fiber::detail::multipart;
using fiber::detail::reattach_claims;
using reading = reattach_claims::reading;

TEST(reattach_claims, a_claimed_chunks_new_task_is_its_workers_and_others_are_not) {
  reattach_claims c;
  c.add("w1", 7, 2, 40, 0);
  EXPECT_TRUE(c.speaks_of_old_tasks("w1"));
  EXPECT_FALSE(c.claim(2, 0, 100).has_value()) << "another chunk";
  EXPECT_EQ(c.claim(2, 40, 101), "w1");
  EXPECT_EQ(c.task_of("w1", 7), 101u);
  EXPECT_FALSE(c.claim(2, 40, 102).has_value()) << "claimed once";
}

TEST(reattach_claims, results_the_journal_answered_are_skipped_and_the_rest_delivered) {
  reattach_claims c;
  c.add("w1", 7, 2, 40, 0);  // the worker ran the chunk from its first item
  (void)c.claim(2, 40, 101);
  // The journal answered the chunk's first 3 items: the new task has [3, 10) left.
  auto r = c.read("w1", 7, false, 2, std::make_pair(std::size_t{3}, std::size_t{10}));
  EXPECT_EQ(r.what, reading::drop) << "items 0 and 1: answered";
  r = c.read("w1", 7, false, 4, std::make_pair(std::size_t{3}, std::size_t{10}));
  EXPECT_EQ(r.what, reading::deliver);
  EXPECT_EQ(r.task, 101u);
  EXPECT_EQ(r.skip, 1u) << "items 2 to 5: item 2 answered";
  r = c.read("w1", 7, true, 0, std::make_pair(std::size_t{6}, std::size_t{10}));
  EXPECT_EQ(r.what, reading::deliver);
  EXPECT_EQ(r.skip, 0u) << "items 6 to 9";
  EXPECT_EQ(c.task_of("w1", 7), 0u) << "the final message ends the claim";
}

TEST(reattach_claims, results_that_begin_past_an_unanswered_item_give_the_chunk_back) {
  reattach_claims c;
  c.add("w1", 7, 2, 40, 5);  // the worker began at item 5 (a resend after a death)
  (void)c.claim(2, 40, 101);
  auto r = c.read("w1", 7, false, 2, std::make_pair(std::size_t{2}, std::size_t{10}));
  EXPECT_EQ(r.what, reading::gap) << "items 2 to 4 have no result anywhere";
  EXPECT_EQ(r.task, 101u);
}

TEST(reattach_claims, a_message_before_its_task_is_made_waits_for_it) {
  reattach_claims c;
  c.add("w1", 7, 2, 40, 0);
  EXPECT_EQ(c.read("w1", 7, true, 0, std::nullopt).what, reading::wait);
  multipart m;
  m.emplace_back("x", 1);
  c.keep("w1", 7, std::move(m));
  (void)c.claim(2, 40, 101);
  EXPECT_EQ(c.waiting(101).size(), 1u);
  EXPECT_TRUE(c.waiting(101).empty()) << "handed back once";
}

TEST(reattach_claims, an_unknown_task_a_ready_and_an_end_are_told_apart) {
  reattach_claims c;
  c.add("w1", 7, 2, 40, 0);
  EXPECT_EQ(c.read("w1", 8, false, 1, std::nullopt).what, reading::unknown);
  c.ready("w1");
  EXPECT_FALSE(c.speaks_of_old_tasks("w1"));
  EXPECT_TRUE(c.holds("w1")) << "its claim is not read yet";
  EXPECT_FALSE(c.holds("w0"));
  EXPECT_FALSE(c.holds("w2"));
  c.forget("w1");
  EXPECT_FALSE(c.holds("w1"));
  EXPECT_FALSE(c.claim(2, 40, 101).has_value()) << "its claims went with it";
}

TEST(reattach_claims, a_worker_taken_up_with_no_claim_speaks_of_old_tasks_until_its_ready) {
  reattach_claims c;
  c.taken_up("w1");
  EXPECT_TRUE(c.speaks_of_old_tasks("w1")) << "its old tasks' messages would be read as this master's tasks";
  EXPECT_EQ(c.read("w1", 3, true, 0, std::nullopt).what, reading::unknown);
  c.ready("w1");
  EXPECT_FALSE(c.speaks_of_old_tasks("w1"));
}

TEST(reattach_claims, a_claim_on_a_chunk_made_with_another_identity_goes) {
  reattach_claims c;
  c.add("w1", 7, 2, 40, 0, 1234);
  EXPECT_FALSE(c.claim(2, 40, 101, 999).has_value()) << "the chunk at its place holds other inputs";
  EXPECT_FALSE(c.holds("w1"));
  c.add("w1", 8, 2, 50, 0, 1234);
  EXPECT_EQ(c.claim(2, 50, 102, 1234), std::optional<std::string>("w1"));
}

TEST(reattach_claims, a_claim_read_to_its_end_is_no_longer_held) {
  reattach_claims c;
  c.add("w1", 7, 2, 40, 0);
  (void)c.claim(2, 40, 101);
  EXPECT_TRUE(c.holds("w1"));
  EXPECT_EQ(c.read("w1", 7, true, 2, std::make_pair(std::size_t{0}, std::size_t{2})).what, reading::deliver);
  EXPECT_FALSE(c.holds("w1"));
}

multipart message(const char* text) {
  multipart m;
  m.emplace_back(text, std::char_traits<char>::length(text));
  return m;
}

std::vector<std::uint64_t> task_ids(const held_results& held) {
  std::vector<std::uint64_t> out;
  for (auto& t : fiber::detail::read_held_state(held.state(1)).tasks) out.push_back(t.id);
  return out;
}

TEST(held_results, a_worker_says_which_tasks_it_ran_and_hands_back_their_messages_in_order) {
  held_results held;
  held.begin(1, 0);
  held.keep(message("one"), true);
  held.begin(2, 3);
  held.keep(message("two a"), false);
  held.keep(message("two b"), true);
  held.begin(3, 0);
  held.keep(message("three"), false);
  auto s = fiber::detail::read_held_state(held.state(42));
  EXPECT_EQ(s.pool_id, 42u);
  ASSERT_EQ(s.tasks.size(), 3u) << "nothing its master's journal holds on disk yet: all kept";
  EXPECT_EQ(s.tasks[1].id, 2u);
  EXPECT_EQ(s.tasks[1].skip, 3u);
  EXPECT_FALSE(s.tasks[1].running);
  EXPECT_EQ(s.tasks[2].id, 3u);
  EXPECT_TRUE(s.tasks[2].running);
  auto copies = held.copies();
  ASSERT_EQ(copies.size(), 4u);
  EXPECT_EQ(copies[1][0].to_string(), "two a");
  EXPECT_EQ(copies[3][0].to_string(), "three");
}

TEST(held_results, what_the_masters_journal_holds_on_disk_goes_and_the_rest_stays) {
  held_results held;
  held.begin(1, 0);
  held.keep(message("one"), true);
  held.begin(2, 0);
  held.keep(message("two"), true);
  held.begin(3, 0);
  held.keep(message("three, running"), false);
  held.journaled(1, false);
  EXPECT_EQ(task_ids(held), (std::vector<std::uint64_t>{2, 3}));
  held.journaled(2, false);
  EXPECT_EQ(task_ids(held), (std::vector<std::uint64_t>{3})) << "the running task is never let go";
  // Taken up by the next master, whose tasks are numbered anew: what it held of the last master's
  // goes only once the new master says those are on disk too.
  held.keep(message("three, last"), true);
  held.orphan();
  held.adopted();
  held.begin(1, 0);
  held.keep(message("new one"), true);
  held.journaled(1, false);
  EXPECT_EQ(task_ids(held), (std::vector<std::uint64_t>{3})) << "the last master's task 3 went unsaid";
  held.begin(2, 0);
  held.keep(message("new two"), true);
  held.journaled(1, true);
  EXPECT_EQ(task_ids(held), (std::vector<std::uint64_t>{2}));
}

TEST(held_results, a_master_that_never_says_its_journal_is_on_disk_leaves_the_worker_holding_its_bound) {
  held_results held(10);
  held.begin(1, 0);
  held.keep(message("123456"), true);
  held.begin(2, 0);
  held.keep(message("123456"), true);  // 12 bytes held: the oldest goes
  EXPECT_EQ(task_ids(held), (std::vector<std::uint64_t>{2}));
  held.begin(3, 0);
  held.keep(message("a running task's twenty"), false);
  EXPECT_EQ(task_ids(held), (std::vector<std::uint64_t>{3})) << "the running task stays whatever its size";
}

TEST(held_results, a_task_of_a_master_that_is_gone_does_not_begin_until_another_takes_the_worker_up) {
  held_results held;
  EXPECT_TRUE(held.begin(1, 0));
  held.orphan();
  EXPECT_FALSE(held.begin(2, 0)) << "a task that waited behind the last began with no master to take it";
  auto s = fiber::detail::read_held_state(held.state(9));
  ASSERT_EQ(s.tasks.size(), 1u);
  EXPECT_EQ(s.tasks[0].id, 1u);
  held.adopted();
  EXPECT_TRUE(held.begin(3, 0));
}

TEST(held_results, a_word_cut_short_or_claiming_more_tasks_than_it_carries_is_refused) {
  held_results held;
  held.begin(1, 0);
  auto whole = held.state(9);
  EXPECT_THROW((void)fiber::detail::read_held_state(whole.substr(0, whole.size() - 1)), fiber::error);
  std::string lying = whole.substr(0, 8);
  std::uint32_t many = 1u << 30;
  lying.append(reinterpret_cast<const char*>(&many), sizeof many);
  EXPECT_THROW((void)fiber::detail::read_held_state(lying), fiber::error);
}

}  // namespace
