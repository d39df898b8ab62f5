// What a durable run's worker holds, as messages (primitives/pool/message_log): read back in order
// and whole, small frames and large alike, from any point still held; what was let go of is gone,
// its large frames too; the buffer's front goes once it is most of it, and what is held stays.
#include "primitives/pool/message_log.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {
using fiber::detail::message_log;
using fiber::detail::multipart;

multipart message(std::vector<std::string> frames) {
  multipart m;
  for (auto& f : frames) m.emplace_back(f.data(), f.size());
  return m;
}

std::vector<std::string> frames_of(const multipart& m) {
  std::vector<std::string> out;
  for (auto& f : m) out.push_back(f.to_string());
  return out;
}

TEST(message_log, messages_come_back_whole_and_in_order_small_and_large_frames_alike) {
  message_log log;
  std::string large(message_log::large_frame, 'L'), empty;
  log.append(message({"head", "a"}));
  log.append(message({"head", large, empty, "b"}));
  log.append(message({}));
  EXPECT_EQ(log.begin(), 0u);
  EXPECT_EQ(log.end(), 3u);
  auto all = log.copies(0, 3);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(frames_of(all[0]), (std::vector<std::string>{"head", "a"}));
  EXPECT_EQ(frames_of(all[1]), (std::vector<std::string>{"head", large, empty, "b"}));
  EXPECT_TRUE(all[2].empty());
  auto middle = log.copies(1, 2);
  ASSERT_EQ(middle.size(), 1u);
  EXPECT_EQ(frames_of(middle[0])[1], large);
}

TEST(message_log, what_was_let_go_of_is_gone_and_the_rest_reads_as_before) {
  message_log log;
  std::string large(4 * message_log::large_frame, 'x');
  for (int i = 0; i < 2000; ++i) log.append(message({"m" + std::to_string(i), i % 3 == 0 ? large : std::string(100, 's')}));
  log.drop_before(1500);  // most of the buffer: its front goes
  EXPECT_EQ(log.begin(), 1500u);
  EXPECT_TRUE(log.copies(0, 1500).empty()) << "a message let go of came back";
  auto rest = log.copies(1500, 2000);
  ASSERT_EQ(rest.size(), 500u);
  for (int i = 1500; i < 2000; ++i) {
    auto f = frames_of(rest[static_cast<std::size_t>(i - 1500)]);
    ASSERT_EQ(f.size(), 2u);
    EXPECT_EQ(f[0], "m" + std::to_string(i));
    EXPECT_EQ(f[1], i % 3 == 0 ? large : std::string(100, 's')) << "message " << i;
  }
  log.append(message({"after"}));
  EXPECT_EQ(frames_of(log.copies(2000, 2001)[0])[0], "after");
  log.drop_before(log.end());
  EXPECT_EQ(log.begin(), log.end());
  EXPECT_TRUE(log.copies(0, log.end()).empty());
}

}  // namespace
