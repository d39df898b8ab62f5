// A pool worker told of its planned end by its engine (a local kill's SIGTERM, `docker kill` with
// SIGTERM as `docker stop` sends, a pod deleted with a grace period, Slurm's time-limit signal
// sent with scancel) hands its work back: nothing is charged an attempt (max_attempts=1 here, so
// a charge would fail the map), stats() counts the worker drained and none lost, an item that
// fits in the notice finishes once, and one that does not is handed back at once and run again
// elsewhere.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "backend/command.hpp"
#include "fiber/fiber.hpp"
#include "folder_wait.hpp"
#include "kubernetes_support.hpp"
#include "run_folder.hpp"
#include "support.hpp"

namespace {
/// Who runs this, as "slurm job/host/worker name/pid" (a Slurm job's id, a pod's name as its host).
std::string worker_identity() {
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* name = std::getenv("FIBER_WORKER_NAME");
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return std::string(job && *job ? job : "-") + "/" + host + "/" + (name ? name : "-") + "/" + std::to_string(::getpid());
}

/// Notes "x who" in dir/started, then waits for dir/gate<x> when x is below `gated`. Item 0
/// with `gated` above 1 first waits for its worker's notice, and says so in dir/noticed.
int noted_at_gate(int x, std::string dir, int gated) {
  {
    std::ofstream(dir + "/started", std::ios::app) << x << " " << worker_identity() << "\n";
  }
  if (x == 0 && gated > 1 && !std::filesystem::exists(dir + "/noticed")) {
    while (!fiber::planned_end_notified()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::ofstream(dir + "/noticed") << "yes\n";
  }
  if (x < gated) fiber_test::wait_in(dir, [&] { return std::filesystem::exists(dir + "/gate" + std::to_string(x)); });
  return x * x;
}

/// An item of work that takes `ms`.
int square_in(int x, int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return x * x;
}
}  // namespace
FIBER_REMOTE(noted_at_gate);
FIBER_REMOTE(square_in);

namespace {
namespace fs = std::filesystem;

/// The starts noted so far: (item, who), in order.
std::vector<std::pair<int, std::string>> starts(const std::string& dir) {
  std::vector<std::pair<int, std::string>> out;
  std::ifstream in(dir + "/started");
  int x;
  std::string who;
  while (in >> x >> who) out.emplace_back(x, who);
  return out;
}

/// Waits until `pred` holds of the starts noted.
template <class Pred>
std::vector<std::pair<int, std::string>> wait_for_starts(const std::string& dir, Pred pred) {
  std::vector<std::pair<int, std::string>> seen;
  fiber_test::wait_in(dir, [&] {
    seen = starts(dir);
    return pred(seen);
  });
  return seen;
}

/// The engine tells `identity` (worker_identity's) of its planned end, as it does ahead of its kill.
void give_notice(const std::string& identity) {
  auto backend = fiber_test::backend_under_test();
  std::vector<std::string> part;
  std::stringstream in(identity);
  for (std::string x; std::getline(in, x, '/');) part.push_back(x);
  ASSERT_EQ(part.size(), 4u) << identity;
  const auto &job = part[0], &host = part[1], &name = part[2], &pid = part[3];
  fiber::detail::command_result r;
  if (backend == "local") {
    r = fiber::detail::run_command({"kill", "-TERM", pid});  // another process's kill, not the pool's
  } else if (backend == "docker") {
    auto id = fiber::detail::run_command({"docker", "ps", "-q", "--filter", "label=fiber.process=" + name, "--filter",
                                          "label=fiber.job=" + fiber::context::default_context().job_id()});
    ASSERT_TRUE(id.ok() && !id.out.empty()) << id.problem() << id.out;
    r = fiber::detail::run_command({"docker", "kill", "--signal=TERM", id.out.substr(0, id.out.find('\n'))});  // docker stop's first
  } else if (backend == "slurm") {
    r = fiber::detail::run_command({"scancel", "--batch", "--signal=URG", job});  // the time limit's notice
  } else {
    // As `kubectl delete pod`: the pod's own grace period, which drain_notice_ms set.
    auto answer = fiber_test::kube_call("DELETE", "/api/v1/namespaces/default/pods/" + host, {}, true);
    ASSERT_FALSE(answer.ec) << answer.why;
    return;
  }
  ASSERT_TRUE(r.ok()) << r.problem();
}

class pool_drain : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = fiber_test::backend_under_test();
    if (backend == "kubernetes" && !fiber_test::on_real_cluster())
      FIBER_TEST_BACKEND_GATED("deletes pods of the real test cluster");
    dir_ = fiber_test::run_folder() / ("fiber-drain-" + std::to_string(::getpid()) + "-" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void open_gate(int x) { std::ofstream(dir_ / ("gate" + std::to_string(x))) << "open\n"; }
  std::string dir() const { return dir_.string(); }

  fs::path dir_;
};

// The item running at the notice fits in it: it finishes, once; the rest of its chunk and what
// its worker held go to the replacement, which the notice started.
TEST_F(pool_drain, a_worker_given_notice_finishes_the_item_that_fits_and_hands_back_the_rest) {
  fiber::pool p(fiber::pool_options{.processes = 1, .max_attempts = 1, .task_estimate = std::chrono::seconds(1)});
  std::vector<std::tuple<int, std::string, int>> args;
  for (int i = 0; i < 8; ++i) args.emplace_back(i, dir(), 8);  // each waits for its gate
  auto result = p.starmap_async(&noted_at_gate, args, 8);
  auto seen = wait_for_starts(dir(), [](auto& s) { return !s.empty(); });
  auto first = seen.front().second;
  give_notice(first);
  // The item sees the notice (fiber::planned_end_notified) before it may end.
  fiber_test::wait_in(dir(), [&] { return fs::exists(dir_ / "noticed"); });
  open_gate(0);
  // The next item starts on the replacement: open the others once another worker runs them.
  wait_for_starts(dir(), [&](auto& s) {
    for (auto& [x, who] : s)
      if (who != first) return true;
    return false;
  });
  for (int i = 1; i < 8; ++i) open_gate(i);
  auto out = std::move(result).get();
  ASSERT_EQ(out.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], i * i);
  int item0 = 0;
  for (auto& [x, who] : starts(dir())) item0 += x == 0;
  EXPECT_EQ(item0, 1) << "the item that fitted ran once";
  auto st = p.stats();
  EXPECT_EQ(st.drained, 1u);
  EXPECT_EQ(st.workers_lost, 0u);
}

// The item running at the notice will not fit (its estimate is longer than the notice): it is
// handed back at once, and runs again, in full, on the replacement.
TEST_F(pool_drain, an_item_that_will_not_fit_the_notice_is_handed_back_and_run_again_elsewhere) {
  fiber::pool p(fiber::pool_options{.processes = 1, .max_attempts = 1});
  std::vector<std::tuple<int, std::string, int>> args;
  for (int i = 0; i < 4; ++i) args.emplace_back(i, dir(), 1);  // item 0 waits for its gate
  auto result = p.with({.task_estimate = std::chrono::hours(1)}).starmap_async(&noted_at_gate, args, 4);
  auto seen = wait_for_starts(dir(), [](auto& s) { return !s.empty(); });
  auto first = seen.front().second;
  give_notice(first);
  wait_for_starts(dir(), [&](auto& s) {
    for (auto& [x, who] : s)
      if (x == 0 && who != first) return true;
    return false;
  });
  open_gate(0);
  auto out = std::move(result).get();
  ASSERT_EQ(out.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], i * i);
  std::set<std::string> ran_item0;
  for (auto& [x, who] : starts(dir()))
    if (x == 0) ran_item0.insert(who);
  EXPECT_EQ(ran_item0.size(), 2u) << "handed back by one worker, run by the next";
  auto st = p.stats();
  EXPECT_EQ(st.drained, 1u);
  EXPECT_EQ(st.workers_lost, 0u);
}

// Slurm's own notice, ahead of the workers' time limit (one minute, the least Slurm has): a map
// that needs more than a minute of each worker completes, its first workers drained before their
// limit and none lost, nothing charged.
TEST_F(pool_drain, slurm_workers_reaching_their_time_limit_drain_and_the_map_completes) {
  if (fiber_test::backend_under_test() != "slurm") FIBER_TEST_BACKEND_GATED("Slurm's time limit and its --signal");
  fiber::context ctx(fiber::config::load({{"slurm_time_limit", "1"}}));
  fiber::pool p(ctx, fiber::pool_options{.processes = 2, .max_attempts = 1});
  std::vector<std::tuple<int, int>> args;
  for (int i = 0; i < 180; ++i) args.emplace_back(i, 1000);  // 90 s of work for each of 2 workers
  auto out = p.starmap(&square_in, args, 1).get();
  ASSERT_EQ(out.size(), 180u);
  for (int i = 0; i < 180; ++i) EXPECT_EQ(out[i], i * i);
  auto st = p.stats();
  EXPECT_GE(st.drained, 2u) << "each first worker reached its limit before the map's end";
  EXPECT_EQ(st.workers_lost, 0u);
}

}  // namespace
