// The reads a process waits for: completion, withdrawal after a timeout, failure at shutdown.
#include "runtime/channels/pending_gets.hpp"

#include <gtest/gtest.h>

#include "fiber/error.hpp"

namespace {
using fiber::detail::multipart;
using fiber::detail::pending_gets;

TEST(pending_gets, a_read_completes_once_with_its_message) {
  pending_gets gets;
  int calls = 0;
  std::string body;
  auto request = gets.add(4, [&](std::error_code ec, multipart m, bool) {
    ++calls;
    EXPECT_FALSE(ec);
    body = m.at(0).to_string();
  });
  EXPECT_TRUE(gets.contains(request));
  multipart m;
  m.emplace_back(std::string_view("hello"));
  gets.complete(request, {}, std::move(m), true);
  gets.complete(request, {}, {}, true);  // a duplicate answer is dropped
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(body, "hello");
  EXPECT_FALSE(gets.contains(request));
}

TEST(pending_gets, a_read_past_its_timeout_is_withdrawn_once_with_its_channel) {
  asio::io_context io;
  pending_gets gets;
  std::error_code result;
  auto request = gets.add(9, [&](std::error_code ec, multipart, bool) { result = ec; });
  std::vector<std::pair<std::uint64_t, std::uint64_t>> withdrawn;
  gets.expire_after(request, io, std::chrono::milliseconds(0), [&](std::uint64_t ch, std::uint64_t req) {
    withdrawn.emplace_back(ch, req);
    gets.complete(req, make_error_code(fiber::errc::timeout), {}, true);  // as the broker answers
  });
  io.run();
  ASSERT_EQ(withdrawn.size(), 1u);
  EXPECT_EQ(withdrawn[0].first, 9u);
  EXPECT_EQ(withdrawn[0].second, request);
  EXPECT_EQ(result, make_error_code(fiber::errc::timeout));
}

TEST(pending_gets, a_read_answered_in_time_is_never_withdrawn) {
  asio::io_context io;
  pending_gets gets;
  bool answered = false, withdrawn = false;
  auto request = gets.add(1, [&](std::error_code ec, multipart, bool) { answered = !ec; });
  gets.expire_after(request, io, std::chrono::hours(1), [&](std::uint64_t, std::uint64_t) { withdrawn = true; });
  gets.complete(request, {}, {}, true);
  io.run();  // returns: the timer was cancelled, nothing else is pending
  EXPECT_TRUE(answered);
  EXPECT_FALSE(withdrawn);
}

TEST(pending_gets, shutdown_fails_every_read_without_running_inline) {
  asio::io_context io;
  pending_gets gets;
  std::vector<std::error_code> results;
  bool inline_allowed = true;
  for (int i = 0; i < 3; ++i) {
    auto r = gets.add(i, [&](std::error_code ec, multipart, bool may_run_inline) {
      results.push_back(ec);
      inline_allowed = inline_allowed && may_run_inline;
    });
    gets.expire_after(r, io, std::chrono::hours(1), [](std::uint64_t, std::uint64_t) {});
  }
  gets.fail_all(make_error_code(fiber::errc::closed));
  io.run();
  ASSERT_EQ(results.size(), 3u);
  for (auto& ec : results) EXPECT_EQ(ec, make_error_code(fiber::errc::closed));
  EXPECT_FALSE(inline_allowed);
}

}  // namespace
