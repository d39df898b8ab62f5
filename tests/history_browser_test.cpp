// A finished run's page (fiber::write_history_page, `fiber history --html`) in a real browser
// (Debian's headless Chromium, tests/chromium.hpp), opened from its file: it shows the run's
// totals, its plot of tasks done per second holds the recording's counts bin by bin and draws them
// in their order of size, and the worker the run lost and the task lost with it are marked. Its
// screenshot is kept (FIBER_TEST_ARTIFACTS, else build/test-artifacts).
#include <fiber/fiber.hpp>
#include <fiber/history.hpp>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "browser_test.hpp"
#include "core/flight_recorder.hpp"
#include "pool_support.hpp"
#include "record_folder.hpp"

namespace {

std::vector<std::uint64_t> numbers(const std::string& text, char sep) {
  std::vector<std::uint64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, sep);) out.push_back(std::stoull(item));
  return out;
}

TEST(history_browser, a_finished_runs_page_shows_its_totals_its_rate_as_recorded_and_its_failures) {
  FIBER_TEST_NEEDS_CHROMIUM();
  record_folder dir("history-page");
  auto marker = marker_path("history-page-death");
  {
    fiber::context ctx(dir.cfg());
    fiber::pool p(ctx, fiber::pool_options{.processes = 3});
    std::vector<int> xs(60);
    std::iota(xs.begin(), xs.end(), 1);
    EXPECT_EQ(p.map(&square, xs, 1).get().size(), 60u);
    EXPECT_EQ(p.apply(&die_once, 5, marker, SIGKILL).get(), 5);  // its first worker dies, the next runs it
    p.close();
    p.join().get();
  }
  std::filesystem::remove(marker);
  auto runs = fiber::run_history(dir.cfg());
  ASSERT_EQ(runs.size(), 1u);
  auto page_path = dir.path / "run.html";
  auto run = fiber::write_history_page(runs[0].id, page_path.string(), dir.cfg());
  EXPECT_EQ(run.tasks_done, 61u);

  fiber_test::chromium page;
  page.go("file://" + page_path.string());
  auto text = [&](const std::string& selector) {
    return std::string(page.eval("document.querySelector('" + selector + "').textContent").as_string());
  };
  EXPECT_EQ(text("#tasks-done"), "61");
  EXPECT_EQ(text("#workers-lost"), "1");
  EXPECT_EQ(text("#run"), run.id);

  // The plot's counts, bin by bin, as the recording has them.
  auto from_ns = std::stoull(std::string(page.eval("document.querySelector('#tasks').dataset.fromNs").as_string()));
  auto bin_ns = std::stoull(std::string(page.eval("document.querySelector('#tasks').dataset.binNs").as_string()));
  auto drawn = numbers(std::string(page.eval("document.querySelector('#tasks polyline').dataset.values").as_string()), ',');
  ASSERT_FALSE(drawn.empty());
  std::vector<std::uint64_t> recorded(drawn.size(), 0);
  std::size_t failures = 0;
  for (auto& [r, t] : fiber::detail::read_flight_file(run.path)) {
    if (r.kind == fiber::detail::record_kind::task_done)
      ++recorded[std::min<std::size_t>(drawn.size() - 1, (r.ns - from_ns) / bin_ns)];
    failures += r.kind == fiber::detail::record_kind::task_lost ||
                (r.kind == fiber::detail::record_kind::worker_down && r.d != 0);
  }
  EXPECT_EQ(drawn, recorded);
  // Drawn as a line through a point per bin, higher for more.
  auto points = page.eval("[...document.querySelector('#tasks polyline').points].map(p => p.y)").as_array();
  ASSERT_EQ(points.size(), drawn.size());
  for (std::size_t i = 0; i < drawn.size(); ++i)
    for (std::size_t j = 0; j < drawn.size(); ++j)
      if (drawn[i] > drawn[j]) EXPECT_LT(points[i].to_number<double>(), points[j].to_number<double>()) << i << " " << j;
  // The dead worker and the task it held, each a mark on the plot and a line in the list.
  EXPECT_EQ(failures, 2u);
  EXPECT_EQ(page.eval("document.querySelectorAll('#tasks line.failure').length").to_number<std::size_t>(), failures);
  EXPECT_EQ(page.eval("document.querySelectorAll('#failures li').length").to_number<std::size_t>(), failures);
  EXPECT_NE(text("#failures").find("died: signal 9"), std::string::npos) << text("#failures");

  auto shot = fiber_test::artifacts() / "history.png";
  std::ofstream(shot) << page.screenshot();
  std::cout << "the page: " << shot.string() << "\n";
}

}  // namespace
