// The dashboard's page in a real browser (Debian's headless Chromium, tests/chromium.hpp): the
// numbers it draws during a run are pool::stats(), it draws the run's throughput, and without the
// token there is no page. Its screenshot is kept (FIBER_TEST_ARTIFACTS, else build/test-artifacts)
// and named in the test's output.
#include <boost/json.hpp>
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "browser_test.hpp"
#include "support.hpp"

namespace {
int held_at(int x, fiber::simple_queue<int> gate) {
  (void)gate.get().get();
  return x;
}
int twice(int x) { return 2 * x; }
}  // namespace
FIBER_REMOTE(held_at);
FIBER_REMOTE(twice);

namespace {


using fiber_test::artifacts;

/// What the page shows of its one pool once it has drawn a state with `done` items done, read
/// from the page's text.
std::string drawn_when_done(fiber_test::chromium& page, std::size_t done) {
  return page
      .eval(R"js((async () => {
  await fiberWhen(s => s.pools.length === 1 && s.pools[0].stats.done === )js" +
            std::to_string(done) + R"js();
  const pool = document.querySelector('#pools section');
  const cell = (n) => pool.querySelector('[id$="-' + n + '"]').textContent;
  const text = (id) => document.getElementById(id).textContent;
  return JSON.stringify({
    queued: cell('queued'), running: cell('running'), done: cell('done'), retried: cell('retried'),
    workers: cell('workers'), workers_started: cell('workers_started'),
    total_done: text('total-done'), total_queued: text('total-queued'), total_running: text('total-running'),
    rows: pool.querySelectorAll('tr[data-worker]').length,
    busy: pool.querySelectorAll('td.state-busy').length,
    status: text('status'), run: text('run')
  });
})())js")
      .as_string()
      .c_str();
}

}  // namespace

TEST(dashboard_browser, the_page_shows_the_pools_stats_during_a_run_and_its_throughput) {
  FIBER_TEST_NEEDS_CHROMIUM();
  fiber::context ctx(fiber::config::load({{"dashboard", "true"}, {"dashboard_interval_ms", "100"}}));
  fiber::simple_queue<int> gate(ctx);
  fiber::pool p(ctx, 2);
  std::vector<std::tuple<int, fiber::simple_queue<int>>> args;
  for (int i = 0; i < 6; ++i) args.emplace_back(i, gate);
  auto held = p.starmap_async(&held_at, args, 1);
  p.ready().get();

  fiber_test::chromium page;
  page.go(ctx.dashboard_url());
  // Each settled point (the released items done, the others waiting on the gate): what the page
  // draws is what stats() says.
  for (std::size_t released = 0; released <= 6; released += 3) {
    auto drawn = boost::json::parse(drawn_when_done(page, released)).as_object();
    auto want = p.stats();
    auto shows = [&](const char* key) { return std::string(drawn.at(key).as_string()); };
    EXPECT_EQ(shows("done"), std::to_string(want.done));
    EXPECT_EQ(shows("queued"), std::to_string(want.queued));
    EXPECT_EQ(shows("running"), std::to_string(want.running));
    EXPECT_EQ(shows("retried"), std::to_string(want.retried));
    EXPECT_EQ(shows("workers"), std::to_string(want.workers));
    EXPECT_EQ(shows("workers_started"), std::to_string(want.workers_started));
    EXPECT_EQ(shows("total_done"), std::to_string(want.done));
    EXPECT_EQ(shows("total_queued"), std::to_string(want.queued));
    EXPECT_EQ(shows("total_running"), std::to_string(want.running));
    EXPECT_EQ(drawn.at("rows").to_number<int>(), 2);  // a row per worker
    EXPECT_EQ(drawn.at("busy").to_number<std::size_t>(), std::min<std::size_t>(2, 6 - released));
    EXPECT_EQ(shows("status"), "live");
    EXPECT_EQ(shows("run"), ctx.job_id());
    if (released < 6)
      for (int i = 0; i < 3; ++i) gate.put(0).get();
  }
  EXPECT_EQ(std::move(held).get().size(), 6u);

  // A burst of work: the plot's line rises above zero, and the page says how fast.
  p.map(&twice, std::vector<int>(20000, 1), 20).get();
  auto peak = page.eval(R"js((async () => {
  const s = await fiberWhen(s => s.pools[0].stats.done === 20006);
  return Math.max(...s.history.map(p => p[1]));
})())js");
  EXPECT_GT(peak.to_number<double>(), 0.0);
  // The workers' rows say who did the work, and add up to it.
  auto by_workers = page.eval(R"js([...document.querySelectorAll('#pools section tr[data-worker]')]
      .reduce((sum, row) => sum + Number(row.children[4].textContent), 0))js");
  EXPECT_EQ(by_workers.to_number<std::size_t>(), p.stats().done);
  auto points = page.eval("document.querySelector('#plot polyline').getAttribute('points').split(' ').length");
  EXPECT_GE(points.to_number<int>(), 2);

  auto shot = artifacts() / "dashboard.png";
  std::ofstream(shot, std::ios::binary) << page.screenshot();
  EXPECT_GT(std::filesystem::file_size(shot), 1000u);
  std::printf("the page's screenshot: %s\n", shot.c_str());
}

TEST(dashboard_browser, without_the_token_there_is_no_page) {
  FIBER_TEST_NEEDS_CHROMIUM();
  fiber::context ctx(fiber::config::load({{"dashboard", "true"}}));
  auto url = ctx.dashboard_url();
  auto bare = url.substr(0, url.find("?token="));
  fiber_test::chromium page;
  for (auto& wrong : {bare, bare + "?token=" + std::string(32, 'f'), bare + "state"}) {
    page.go(wrong);
    auto text = std::string(page.eval("document.body.innerText").as_string());
    EXPECT_NE(text.find("needs the token of its run"), std::string::npos) << wrong << ": " << text;
    EXPECT_EQ(page.eval("typeof window.fiberWhen").as_string(), "undefined") << wrong;
  }
  page.go(url);
  EXPECT_EQ(page.eval("typeof window.fiberWhen").as_string(), "function");
}
