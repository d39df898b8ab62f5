// The dashboard's view on its own, with a pool that counts how it is asked: a tick takes the
// pools' numbers for the plot and no row, the page's sample takes everything, and a pool that
// ended keeps the rows it was last shown with and the numbers it last said.
#include "runtime/observe/dashboard_view.hpp"

#include <gtest/gtest.h>

#include <boost/json/array.hpp>

namespace {
using fiber::detail::dashboard_view;

/// A pool that says `done` and, asked for rows, one row per worker; gone once `alive` is false.
struct counted_pool {
  int asked_rows = 0, asked_numbers = 0;
  std::uint64_t done = 0;
  bool alive = true;
  dashboard_view::describe_fn fn() {
    return [this](bool rows) -> std::optional<boost::json::object> {
      if (!alive) return std::nullopt;
      ++(rows ? asked_rows : asked_numbers);
      boost::json::object out{{"id", 1}, {"state", "open"}};
      out["stats"] = {{"queued", 0}, {"running", 0}, {"done", done}};
      if (rows) out["workers"] = boost::json::array{boost::json::object{{"name", "PoolWorker-1-1"}}};
      return out;
    };
  }
};

std::uint64_t done_of(const boost::json::object& pool) { return pool.at("stats").at("done").to_number<std::uint64_t>(); }

TEST(dashboard_view, a_tick_takes_the_pools_numbers_and_no_row) {
  dashboard_view view("run", "program", "local");
  counted_pool pool;
  view.add_pool(1, pool.fn());
  for (int i = 0; i < 5; ++i) view.tick();
  EXPECT_EQ(pool.asked_numbers, 5);
  EXPECT_EQ(pool.asked_rows, 0);
  auto s = view.sample();
  EXPECT_EQ(pool.asked_rows, 1);
  EXPECT_EQ(s.at("history").as_array().size(), 5u) << "a point per tick, none per sample";
  EXPECT_EQ(s.at("pools").as_array()[0].at("workers").as_array().size(), 1u);
}

TEST(dashboard_view, the_plot_has_what_the_ticks_saw_and_the_sample_the_numbers_now) {
  dashboard_view view("run", "program", "local");
  counted_pool pool;
  view.add_pool(1, pool.fn());
  view.tick();
  pool.done = 40;
  view.tick();
  pool.done = 50;  // after the last tick: in the sample's totals, not in the plot
  auto s = view.sample();
  EXPECT_EQ(s.at("totals").at("done").to_number<std::uint64_t>(), 50u);
  EXPECT_EQ(s.at("history").as_array().size(), 2u);
}

TEST(dashboard_view, an_ended_pool_keeps_its_last_rows_and_the_numbers_it_last_said) {
  dashboard_view view("run", "program", "local");
  counted_pool pool;
  view.add_pool(1, pool.fn());
  (void)view.sample();  // a page read it, rows and all
  pool.done = 7;
  view.tick();  // its numbers only
  pool.alive = false;
  view.tick();  // gone
  auto s = view.sample();
  auto& shown = s.at("pools").as_array()[0].as_object();
  EXPECT_EQ(shown.at("state").as_string(), "ended");
  EXPECT_EQ(done_of(shown), 7u);
  EXPECT_EQ(shown.at("workers").as_array().size(), 1u);
  EXPECT_EQ(s.at("totals").at("done").to_number<std::uint64_t>(), 7u);
}

TEST(dashboard_view, a_pool_that_ended_before_any_page_asked_is_shown_with_an_empty_list_of_workers) {
  dashboard_view view("run", "program", "local");
  counted_pool pool;
  view.add_pool(1, pool.fn());
  pool.done = 3;
  view.tick();
  pool.alive = false;
  view.tick();
  auto s = view.sample();
  auto& shown = s.at("pools").as_array()[0].as_object();
  EXPECT_EQ(shown.at("state").as_string(), "ended");
  EXPECT_EQ(done_of(shown), 3u);
  ASSERT_TRUE(shown.contains("workers")) << "the page reads every pool's list of workers";
  EXPECT_TRUE(shown.at("workers").as_array().empty());
  EXPECT_EQ(pool.asked_rows, 0);
}

}  // namespace
