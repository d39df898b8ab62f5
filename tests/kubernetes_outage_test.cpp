// The API server going away under a running pool, on the REAL test cluster
// (scripts/kubernetes_cluster.sh): the API server restarted mid-map, after etcd's history was
// compacted, so that the master's watch, resuming from the last resourceVersion it saw, is told
// 410 Gone and must list again. Each test stops the API server every test beside it uses, so
// they run alone (RUN_SERIAL, tests/CMakeLists.txt). Label kubernetes.
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <numeric>
#include <string>

#include "kubernetes_support.hpp"
#include "support.hpp"

namespace {
void do_nothing() {}
int square(int x) { return x * x; }
int hold_then_square(int x, fiber::simple_queue<int> started, fiber::simple_queue<int> release) {
  if (x == 0) {
    started.put(0).get();
    (void)release.get().get();
  }
  return x * x;
}
}  // namespace
FIBER_REMOTE(do_nothing);
FIBER_REMOTE(square);
FIBER_REMOTE(hold_then_square);

namespace {

class kubernetes_outage : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = fiber_test::kube_problem(); !why.empty()) FIBER_TEST_ENGINE_MISSING("Kubernetes", why);
    if (!fiber_test::on_real_cluster()) FIBER_TEST_BACKEND_GATED("these tests are for the real test cluster (build/engines/k8s)");
  }
  /// The audit log's entries from byte `from` on (one JSON object per request the API server answered).
  static std::vector<boost::json::object> audit_since(std::streamoff from) {
    std::ifstream in(fiber_test::kube_dir() + "/audit.log");
    in.seekg(from);
    std::vector<boost::json::object> out;
    for (std::string line; std::getline(in, line);) {
      boost::system::error_code ec;
      auto v = boost::json::parse(line, ec);
      if (!ec && v.is_object()) out.push_back(std::move(v.as_object()));
    }
    return out;
  }
  /// Now as the audit log writes its timestamps (RFC 3339, UTC, microseconds), for comparing.
  static std::string now_utc() {
    auto now = std::chrono::system_clock::now();
    auto t = std::chrono::system_clock::to_time_t(now);
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[40];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(us));
    return buf;
  }
  static std::streamoff audit_size() {
    std::ifstream in(fiber_test::kube_dir() + "/audit.log", std::ios::ate);
    return in ? static_cast<std::streamoff>(in.tellg()) : 0;
  }
};

TEST_F(kubernetes_outage, the_api_server_restarted_after_etcd_compacted_mid_map_loses_no_worker_and_no_task) {
  fiber::context ctx;
  fiber::simple_queue<int> started(ctx), release(ctx);
  fiber::pool p(ctx, {.processes = 2});
  EXPECT_EQ(p.map(&square, std::vector<int>{1, 2, 3, 4}).get(), (std::vector<int>{1, 4, 9, 16}));
  auto held = p.apply_async(&hold_then_square, 0, started, release);
  (void)started.get().get();
  std::vector<int> xs(40);
  std::iota(xs.begin(), xs.end(), 1);
  auto rest = p.map_async(&square, xs);

  auto before = audit_size();
  auto restart_began = now_utc();
  auto [compacted, revision] = fiber_test::cluster_script("compact-etcd");
  ASSERT_TRUE(compacted) << revision;
  auto [restarted, why] = fiber_test::cluster_script("restart-apiserver");
  ASSERT_TRUE(restarted) << why;

  release.put(1).get();
  EXPECT_EQ(std::move(held).get(), 0);
  auto squares = std::move(rest).get();
  ASSERT_EQ(squares.size(), xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(squares[i], xs[i] * xs[i]);
  EXPECT_EQ(p.stats().workers_lost, 0u);

  // The watch is followed again: a child started now is seen to run and to end.
  fiber::process child(ctx, &do_nothing);
  child.start().get();
  child.join().get();
  EXPECT_EQ(child.exitcode(), 0);

  // What the master asked the new API server: its watch resumed from a resourceVersion it had seen
  // before the restart (answered 410 Gone: compacted, and older than the new server's cache), then
  // a list of its pods, the relist.
  std::string resumed_at, listed_at;
  for (auto& e : audit_since(before)) {
    auto* uri = e.if_contains("requestURI");
    auto* verb = e.if_contains("verb");
    auto* received = e.if_contains("requestReceivedTimestamp");
    if (!uri || !verb || !received || uri->as_string().find(ctx.job_id()) == std::string::npos) continue;
    auto at = std::string(received->as_string());
    if (at < restart_began) continue;  // the watch the restart ended, and what came before
    if (verb->as_string() == "watch" && resumed_at.empty()) resumed_at = at;
    if (verb->as_string() == "list" && !resumed_at.empty() && listed_at.empty()) listed_at = at;
  }
  EXPECT_FALSE(resumed_at.empty()) << "the master's watch was not resumed after the restart";
  EXPECT_FALSE(listed_at.empty()) << "no list of the job's pods after the watch resumed: the 410 was not answered by a relist";
}

}  // namespace
