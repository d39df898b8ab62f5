// Pool overhead, throughput and start, computed the way multiprocessing's side that
// bench/compare/run.sh runs beside it (bench/compare/mp/pool_overhead.py, pool_throughput.py)
// computes them:
// overhead per task = (wall time - tasks x duration / workers) / tasks, calibrated by the sleep's
// own overshoot.
#include <benchmark/benchmark.h>
#include <fiber/fiber.hpp>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <stdexcept>
#include <set>
#include <thread>

#include "../tests/proc_children.hpp"

namespace {
int sleep_us(int us) {
  if (us) std::this_thread::sleep_for(std::chrono::microseconds(us));
  return us;
}
int identity(int x) { return x; }
// Busy for `us` microseconds: short tasks that sleeping would overshoot tenfold.
int spin_us(int us) {
  auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) {
  }
  return us;
}
}  // namespace
FIBER_REMOTE(sleep_us);
FIBER_REMOTE(identity);
FIBER_REMOTE(spin_us);
// The worker that ran a task, after 10 ms of work: the task the peers' "ready" workload gives
// each of theirs (peers.py's sleepy_pid).
int worker_pid(int) {
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return static_cast<int>(::getpid());
}
FIBER_REMOTE(worker_pid);

namespace {
using clock_type = std::chrono::steady_clock;

// Mean real duration of sleep_for(d) here: what "ideal_cal" uses.
double measured_sleep_s(int us) {
  if (!us) return 0;
  auto t0 = clock_type::now();
  for (int i = 0; i < 300; ++i) std::this_thread::sleep_for(std::chrono::microseconds(us));
  return std::chrono::duration<double>(clock_type::now() - t0).count() / 300;
}

void pool_overhead(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0)), d_us = static_cast<int>(state.range(1));
  const int n = d_us >= 10000 ? 500 : 5000;
  const double d_cal = measured_sleep_s(d_us);
  fiber::pool p(workers);
  p.ready().get();
  (void)p.map(&sleep_us, std::vector<int>(workers * 4, 0), 1).get();  // warm-up
  std::vector<int> xs(n, d_us);
  double wall = 0;
  for (auto _ : state) {
    auto t0 = clock_type::now();
    auto r = p.map(&sleep_us, xs, 1).get();
    wall = std::chrono::duration<double>(clock_type::now() - t0).count();
    state.SetIterationTime(wall);
    benchmark::DoNotOptimize(r);
  }
  state.counters["ovh_us"] = (wall - n * (d_us / 1e6) / workers) / n * 1e6;
  state.counters["ovh_cal_us"] = (wall - n * d_cal / workers) / n * 1e6;
}
BENCHMARK(pool_overhead)
    ->ArgsProduct({{2, 4}, {0, 1000, 10000}})
    ->ArgNames({"W", "D_us"})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(3);

void pool_throughput(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0));
  const auto chunksize = static_cast<std::size_t>(state.range(1));
  fiber::pool p(workers);
  p.ready().get();
  std::vector<int> xs(100000);
  std::iota(xs.begin(), xs.end(), 0);
  (void)p.map(&identity, xs, chunksize).get();  // warm-up
  for (auto _ : state) {
    auto r = p.map(&identity, xs, chunksize).get();
    if (r.back() != 99999) state.SkipWithError("wrong result");
  }
  state.counters["tasks_per_s"] = benchmark::Counter(static_cast<double>(xs.size()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(pool_throughput)
    ->ArgsProduct({{2, 4}, {0, 1000}})
    ->ArgNames({"W", "chunksize"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Repetitions(3);

// Items a second through imap's blocking iterator beside map's over the same 200,000 items on
// two workers: how far the stream's per-result hand-over falls behind a whole map. `chunksize`
// -1 is each call's default; bench/compare/imap_rate.py runs multiprocessing's imap beside it.
void pool_imap_rate(benchmark::State& state) {
  const bool stream = state.range(0) != 0;
  const auto chunksize = state.range(1);
  fiber::pool p(2);
  p.ready().get();
  std::vector<int> xs(200000);
  std::iota(xs.begin(), xs.end(), 0);
  auto run = [&] {
    long long sum = 0;
    if (!stream) {
      auto r = chunksize < 0 ? p.map(&identity, xs).get() : p.map(&identity, xs, static_cast<std::size_t>(chunksize)).get();
      for (int y : r) sum += y;
    } else if (chunksize < 0) {
      for (int y : p.imap(&identity, xs)) sum += y;
    } else {
      for (int y : p.imap(&identity, xs, static_cast<std::size_t>(chunksize))) sum += y;
    }
    return sum;
  };
  run();  // warm-up
  for (auto _ : state)
    if (run() != 199999LL * 200000 / 2) state.SkipWithError("wrong result");
  state.counters["items_per_s"] = benchmark::Counter(static_cast<double>(xs.size()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(pool_imap_rate)
    ->Args({0, -1})
    ->Args({1, -1})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({0, 1000})
    ->Args({1, 1000})
    ->ArgNames({"imap", "chunksize"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1)
    ->Repetitions(3);

// imap beside map on one pool, taken in turns (which goes first alternates): imap_over_map is the
// median of each pair's time ratio, as the machine's speed moves between runs far more than
// between two calls in a row. `chunksize` 0 is each call's default.
void pool_imap_ratio(benchmark::State& state) {
  const auto chunksize = static_cast<std::size_t>(state.range(0));
  fiber::pool p(2);
  p.ready().get();
  std::vector<int> xs(200000);
  std::iota(xs.begin(), xs.end(), 0);
  auto timed = [&](bool stream) {
    auto start = std::chrono::steady_clock::now();
    long long sum = 0;
    if (stream)
      for (int y : p.imap(&identity, xs, chunksize)) sum += y;
    else
      for (int y : p.map(&identity, xs, chunksize).get()) sum += y;
    if (sum != 199999LL * 200000 / 2) throw std::runtime_error("wrong result");
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  (void)timed(false), (void)timed(true);  // warm-up
  std::vector<double> ratios;
  for (auto _ : state)
    for (int pair = 0; pair < 20; ++pair) {
      double imap = 0, map = 0;
      if (pair % 2) {
        imap = timed(true), map = timed(false);
      } else {
        map = timed(false), imap = timed(true);
      }
      ratios.push_back(imap / map);
    }
  std::sort(ratios.begin(), ratios.end());
  state.counters["imap_over_map"] = ratios[ratios.size() / 2];
  state.counters["q1"] = ratios[ratios.size() / 4];
  state.counters["q3"] = ratios[ratios.size() * 3 / 4];
}
BENCHMARK(pool_imap_ratio)->Arg(0)->Arg(1000)->ArgName("chunksize")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

// One task's round trip on a warm pool: apply, wait for the result (the peers' harness measures
// the same, bench/compare/peers/peers.py).
void pool_apply_latency(benchmark::State& state) {
  fiber::pool p(static_cast<int>(state.range(0)));
  p.ready().get();
  for (int i = 0; i < 100; ++i) (void)p.apply(&identity, i).get();  // warm-up
  for (auto _ : state) benchmark::DoNotOptimize(p.apply(&identity, 1).get());
}
BENCHMARK(pool_apply_latency)->Arg(2)->Arg(4)->ArgName("W")->Unit(benchmark::kMicrosecond)->UseRealTime()->Iterations(2000)->Repetitions(3);

// From constructing the pool until all of its workers are ready.
void pool_start(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0));
  for (auto _ : state) {
    fiber::pool p(workers);
    p.ready().get();
    state.PauseTiming();
    p.terminate().get();
    state.ResumeTiming();
  }
}
BENCHMARK(pool_start)->Arg(2)->Arg(4)->ArgName("W")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(20)->Repetitions(3);
// 256 workers ready (beside the peers' pools of as many), and 32 (beside
// Ray's and Dask's, which cannot start 256 here).
BENCHMARK(pool_start)->Arg(32)->Arg(256)->ArgName("W")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1)->Repetitions(3);

// Measured as bench/compare/peers/peers.py measures the peers' pools: from creating a pool of W
// workers until every worker has run a task (tasks of chunksize 1 until W workers answered).
void pool_ready_ran_a_task(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0));
  std::vector<int> items(static_cast<std::size_t>(workers));
  for (auto _ : state) {
    fiber::pool p(workers);
    std::set<int> seen;
    while (static_cast<int>(seen.size()) < workers)
      for (int pid : p.map(&worker_pid, items, 1).get()) seen.insert(pid);
    state.PauseTiming();
    p.terminate().get();
    state.ResumeTiming();
  }
}
BENCHMARK(pool_ready_ran_a_task)->Arg(32)->Arg(256)->ArgName("W")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1)->Repetitions(3);

// The framework test of uber/fiber's paper: 5 workers, rounds of 5 apply_async tasks of D each,
// the round's results collected before the next round starts. The ideal round takes D (the five
// run side by side); ratio = wall / (rounds x measured D). Sleeping tasks run side by side on
// any number of cores.
void framework_rounds(benchmark::State& state) {
  const int workers = 5, per_round = 5, rounds = 200, d_us = static_cast<int>(state.range(0));
  const double d_cal = measured_sleep_s(d_us);
  fiber::pool p(workers);
  p.ready().get();
  for (auto _ : state) {
    auto t0 = clock_type::now();
    for (int r = 0; r < rounds; ++r) {
      std::vector<fiber::op<int>> pending;
      for (int i = 0; i < per_round; ++i) pending.push_back(p.apply_async(&sleep_us, d_us));
      for (auto& o : pending) benchmark::DoNotOptimize(std::move(o).get());
    }
    double wall = std::chrono::duration<double>(clock_type::now() - t0).count();
    state.SetIterationTime(wall);
    state.counters["ratio_to_ideal"] = wall / (rounds * d_cal);
    state.counters["ovh_per_round_us"] = (wall - rounds * d_cal) / rounds * 1e6;
  }
}
BENCHMARK(framework_rounds)->Arg(1000)->ArgName("D_us")->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(3);

// W=4, D=1 ms, N=5000, with one worker SIGKILLed every second: results stay exact.
void pool_overhead_with_kills(benchmark::State& state) {
  const int workers = 4, d_us = 1000, n = 5000;
  const double d_cal = measured_sleep_s(d_us);
  fiber::pool p(workers);
  p.ready().get();
  std::vector<int> xs(n, d_us);
  double wall = 0;
  std::size_t killed = 0;
  for (auto _ : state) {
    std::atomic<bool> running{true};
    std::thread killer([&] {
      while (running) {
        for (int i = 0; i < 100 && running; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        auto pids = fiber_test::child_pids();  // pool workers (not the fork server)
        if (running && !pids.empty()) {
          kill(pids.front(), SIGKILL);
          ++killed;
        }
      }
    });
    auto t0 = clock_type::now();
    auto r = p.map(&sleep_us, xs, 1).get();
    wall = std::chrono::duration<double>(clock_type::now() - t0).count();
    running = false;
    killer.join();
    state.SetIterationTime(wall);
    if (r != xs) state.SkipWithError("results differ");
  }
  state.counters["ovh_cal_us"] = (wall - n * d_cal / workers) / n * 1e6;
  state.counters["killed"] = static_cast<double>(killed);
  state.counters["workers_lost"] = static_cast<double>(p.stats().workers_lost);
}
BENCHMARK(pool_overhead_with_kills)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(1);

// Chaos: 1,000,000 items of 5 µs on pool(4), default chunks (62,500 items, about 0.3 s
// each), with a worker SIGKILLed every kill_ms (0: none). The map must complete with every
// result; its time divided by the run without kills is the price of the deaths.
void pool_map_under_kills(benchmark::State& state) {
  const int workers = 4, n = 1000000, kill_ms = static_cast<int>(state.range(0));
  fiber::pool p(workers);
  p.ready().get();
  std::vector<int> xs(n, 5);
  std::size_t killed = 0;
  for (auto _ : state) {
    std::atomic<bool> running{true};
    std::thread killer([&] {
      if (!kill_ms) return;
      while (running) {
        std::this_thread::sleep_for(std::chrono::milliseconds(kill_ms));  // the fault's rate, not a wait
        auto pids = fiber_test::child_pids();
        if (running && !pids.empty()) {
          kill(pids[killed % pids.size()], SIGKILL);
          ++killed;
        }
      }
    });
    auto t0 = clock_type::now();
    std::vector<int> r;
    try {
      r = p.map(&spin_us, xs).get();
    } catch (const std::exception& e) {
      running = false;
      killer.join();
      state.SkipWithError(e.what());
      break;
    }
    state.SetIterationTime(std::chrono::duration<double>(clock_type::now() - t0).count());
    running = false;
    killer.join();
    if (r != xs) state.SkipWithError("results differ");
  }
  state.counters["killed"] = static_cast<double>(killed);
  state.counters["workers_lost"] = static_cast<double>(p.stats().workers_lost);
  state.counters["retried"] = static_cast<double>(p.stats().retried);
}
BENCHMARK(pool_map_under_kills)->Arg(0)->Arg(100)->ArgName("kill_ms")->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(1)->Repetitions(3);
}  // namespace
