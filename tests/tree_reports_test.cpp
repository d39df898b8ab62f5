// The top master's reports from its tree on their own: each kind read from its frames and handed
// to its taker, and a message of the wrong shape dropped.
#include "runtime/observe/tree_reports.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {
using namespace fiber::detail;

multipart frames(std::initializer_list<std::string> parts) {
  multipart m;
  for (auto& p : parts) m.emplace_back(p.data(), p.size());
  return m;
}

std::string u64(std::uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

TEST(tree_reports, each_kind_goes_to_its_taker_with_its_fields) {
  tree_reports reports;
  std::string seen;
  reports.record_with([&](record_kind, std::string_view name, std::uint64_t c, std::uint64_t d, std::string_view text) {
    seen += "record " + std::string(name) + " " + std::to_string(c) + " " + std::to_string(d) + " " + std::string(text) + ";";
  });
  reports.take_records_with([&](std::uint64_t sender, std::uint64_t now, std::string_view tree, std::string_view records) {
    seen += "batch " + std::to_string(sender) + " " + std::to_string(now) + " " + std::string(tree) + " " +
            std::string(records) + ";";
  });
  reports.take_pool_views_with([&](std::uint64_t pool, std::string_view tree, std::string_view state, bool ended) {
    seen += "pool " + std::to_string(pool) + " " + std::string(tree) + " " + std::string(state) + (ended ? " ended" : "") + ";";
  });
  EXPECT_TRUE(reports.take(kind::record, 0, frames({"child", u64(1), u64(2), "text"})));
  EXPECT_TRUE(reports.take(kind::record_batch, 0, frames({u64(3), u64(4), "0.1", "recs"})));
  EXPECT_TRUE(reports.take(kind::pool_view, 1, frames({u64(5), "0.1", "{}"})));
  EXPECT_EQ(seen, "record child 1 2 text;batch 3 4 0.1 recs;pool 5 0.1 {} ended;");
}

TEST(tree_reports, a_report_of_the_wrong_shape_or_without_a_taker_is_dropped) {
  tree_reports reports;
  int taken = 0;
  EXPECT_FALSE(reports.take(kind::pool_view, 0, frames({u64(5), "0.1", "{}"})));  // no taker yet
  reports.take_pool_views_with([&](std::uint64_t, std::string_view, std::string_view, bool) { ++taken; });
  reports.record_with([&](record_kind, std::string_view, std::uint64_t, std::uint64_t, std::string_view) { ++taken; });
  EXPECT_FALSE(reports.take(kind::pool_view, 0, frames({"short", "0.1", "{}"})));
  EXPECT_FALSE(reports.take(kind::pool_view, 0, frames({u64(5), "0.1"})));
  EXPECT_FALSE(reports.take(kind::record, 0, frames({"child", u64(1), "2", "text"})));
  EXPECT_FALSE(reports.take(kind::hello, 0, frames({})));
  EXPECT_EQ(taken, 0);
}

}  // namespace
