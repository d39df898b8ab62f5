// A map on Slurm workers whose jobs reach their time limit during it, beside the same map on
// workers with no limit, and on workers with the limit and no notice (drain_notice_ms = 0: each
// limit kills its worker, as before workers drained), in one run: what planned endings cost when
// workers hand their work back at Slurm's notice (drained) and are replaced at once.
//   drain_bench [ITEMS=10000] [ITEM_MS=50] [WORKERS=4] [LIMIT_MINUTES=1] [ROUNDS=1]
// Run with FIBER_BACKEND=slurm on a cluster (the test cluster: scripts/engines.sh start). Each
// round starts with another of the three maps.
#include <fiber/fiber.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {
int square_in(int x, int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return x * x;
}
}  // namespace
FIBER_REMOTE(square_in);

namespace {
struct outcome {
  double seconds = 0;
  fiber::pool_stats stats;
  std::string failed;
};

outcome timed_map(const std::string& time_limit, bool notice, int workers, const std::vector<std::tuple<int, int>>& args) {
  fiber::context ctx(fiber::config::load({{"slurm_time_limit", time_limit}, {"drain_notice_ms", notice ? "30000" : "0"}}));
  fiber::pool p(ctx, fiber::pool_options{.processes = workers});
  p.ready().get();
  outcome o;
  auto t0 = std::chrono::steady_clock::now();
  try {
    auto out = p.starmap(&square_in, args, 1).get();
    for (std::size_t i = 0; i < out.size() && o.failed.empty(); ++i)
      if (out[i] != std::get<0>(args[i]) * std::get<0>(args[i])) o.failed = "result " + std::to_string(i) + " is wrong";
  } catch (const std::exception& e) {
    o.failed = e.what();
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  o.stats = p.stats();
  p.terminate().get();
  return o;
}

void show(const char* what, const outcome& o) {
  std::printf("%-22s %8.2f s  %s; %zu drained, %zu lost, %zu run again, %zu workers started\n", what, o.seconds,
              o.failed.empty() ? "completed" : o.failed.c_str(), o.stats.drained, o.stats.workers_lost, o.stats.retried,
              o.stats.workers_started);
}
}  // namespace

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  int items = argc > 1 ? std::atoi(argv[1]) : 10000, ms = argc > 2 ? std::atoi(argv[2]) : 50;
  int workers = argc > 3 ? std::atoi(argv[3]) : 4;
  std::string limit = argc > 4 ? argv[4] : "1";
  int rounds = argc > 5 ? std::atoi(argv[5]) : 1;
  std::vector<std::tuple<int, int>> args;
  for (int i = 0; i < items; ++i) args.emplace_back(i, ms);
  std::printf("%d items of %d ms on %d workers; time limit %s minute(s) against none\n", items, ms, workers, limit.c_str());
  for (int r = 0; r < rounds; ++r) {
    outcome maps[3];  // no limit; the limit with its notice; the limit with none
    for (int k = 0; k < 3; ++k) {
      int which = (r + k) % 3;
      maps[which] = timed_map(which == 0 ? "" : limit, which != 2, workers, args);
    }
    show("no time limit:", maps[0]);
    show("limit, drained:", maps[1]);
    show("limit, no notice:", maps[2]);
    std::printf("ratio drained / no limit: %.3fx; drained / no notice: %.3fx\n", maps[1].seconds / maps[0].seconds,
                maps[1].seconds / maps[2].seconds);
  }
  return 0;
}
