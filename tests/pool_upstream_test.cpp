// A nested master's pool state sent up, on its own, on a real io_context: nothing before start,
// the state at once and then every interval while its owner lives, a show on demand, and the
// last state marked ended when it goes; nothing marked ended for one never started.
#include "primitives/pool/pool_upstream.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace {
using fiber::detail::pool_upstream;

struct sent {
  std::string state;
  bool ended;
};

TEST(pool_upstream, the_state_goes_up_at_once_then_on_each_turn_and_the_last_marked_ended) {
  asio::io_context io;
  std::vector<sent> got;
  auto owner = std::make_shared<int>(0);
  int n = 0;
  {
    pool_upstream up(io, std::chrono::milliseconds(0), [&](std::string_view s, bool ended) {
      got.push_back({std::string(s), ended});
    });
    up.show();  // not started: nothing
    EXPECT_TRUE(got.empty());
    up.start(owner, [&] { return boost::json::object{{"n", ++n}}; });
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].state, R"({"n":1})");
    io.run_one();  // the interval passed: sent again
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[1].state, R"({"n":2})");
    up.show();
    EXPECT_EQ(got.size(), 3u);
    owner.reset();  // the pool is going: the timer stops
    io.run();
    EXPECT_EQ(got.size(), 3u);
  }
  ASSERT_EQ(got.size(), 4u);
  EXPECT_TRUE(got[3].ended);
  EXPECT_EQ(got[3].state, R"({"n":3})");  // the last it described
}

TEST(pool_upstream, one_never_started_says_nothing_when_it_goes) {
  asio::io_context io;
  int sends = 0;
  { pool_upstream up(io, std::chrono::milliseconds(10), [&](std::string_view, bool) { ++sends; }); }
  EXPECT_EQ(sends, 0);
}

}  // namespace
