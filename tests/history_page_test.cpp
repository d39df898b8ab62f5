// A run's page (core/history_page) from records made here: its time cut into bins, tasks done
// counted in the bin of their end, workers held from bin to bin, failures in order; and a page
// whose names never become markup and which runs no script.
#include "core/history_page.hpp"

#include <gtest/gtest.h>

namespace {
using fiber::detail::read_record;
using fiber::detail::record_kind;

read_record rec(record_kind k, std::uint64_t ns, std::uint32_t a = 0, std::uint64_t c = 0, std::uint64_t d = 0,
                std::string text = {}) {
  read_record r;
  r.r.kind = k;
  r.r.ns = ns;
  r.r.a = a;
  r.r.c = c;
  r.r.d = d;
  r.text = std::move(text);
  return r;
}
}  // namespace

TEST(history_page, tasks_fall_in_the_bin_of_their_end_and_workers_carry_from_bin_to_bin) {
  std::vector<read_record> records = {
      rec(record_kind::name, 0, 1, 0, 0, "PoolWorker-1-1"),
      rec(record_kind::worker_up, 0, 1),
      rec(record_kind::worker_up, 5, 2),
      rec(record_kind::task_done, 15, 1),
      rec(record_kind::task_done, 19, 1),
      rec(record_kind::worker_down, 25, 1, static_cast<std::uint64_t>(-9), 1, "signal 9"),
      rec(record_kind::task_lost, 25, 1, 7),
      rec(record_kind::task_done, 39, 2),
  };
  auto s = fiber::detail::series_of(records, 4);  // 40 ns: bins of 10
  EXPECT_EQ(s.from_ns, 0u);
  EXPECT_EQ(s.bin_ns, 10u);
  EXPECT_EQ(s.done, (std::vector<std::uint64_t>{0, 2, 0, 1}));
  // Two up from the first bin; the death in the third leaves one, held in the fourth.
  EXPECT_EQ(s.workers, (std::vector<std::uint64_t>{2, 2, 2, 1}));
  ASSERT_EQ(s.failures.size(), 2u);
  EXPECT_EQ(s.failures[0].what, "PoolWorker-1-1 died: signal 9");
  EXPECT_EQ(s.failures[1].what, "task 7 lost with its worker");
}

TEST(history_page, names_are_text_and_the_page_runs_no_script) {
  fiber::recorded_run run;
  run.id = "abc";
  run.program = "<script>alert(1)</script>";
  std::vector<read_record> records = {rec(record_kind::name, 0, 1, 0, 0, "<img src=x onerror=alert(1)>"),
                                      rec(record_kind::worker_up, 0, 1),
                                      rec(record_kind::worker_down, 9, 1, 0, 1, "\"quoted\" & <b>")};
  auto page = fiber::detail::history_page(run, records);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(page.find("&quot;quoted&quot; &amp; &lt;b&gt;"), std::string::npos);
  EXPECT_NE(page.find("default-src 'none'"), std::string::npos) << "and asks for nothing, if a browser were told to";
}
