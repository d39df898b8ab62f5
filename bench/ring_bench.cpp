// Collectives of a fiber::ring, measured inside the members (rank 0 reports), in the format
// bench/compare/mpi_collectives.c prints for Open MPI, so bench/compare/run.sh can set them side
// by side: "<collective> bytes=<B> us=<median time per call>" (allgather: B from each member).
//   build/bench/ring_bench [members=4] [overlap]
// Time per call is the median over repeats of the mean over a batch; allreduce's bus bandwidth
// (nccl-tests' definition) is bytes × 2(N−1)/N ÷ time.
#include <fiber/fiber.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

namespace {
using clock_type = std::chrono::steady_clock;

template <class F>
double median_us(const fiber::ring_member& me, std::size_t bytes, F call) {
  int batch = bytes <= 65536 ? 200 : bytes <= (1 << 22) ? 20 : 4;
  std::vector<double> times;
  call();  // warm-up (and the links)
  for (int repeat = 0; repeat < 5; ++repeat) {
    me.barrier();
    auto t0 = clock_type::now();
    for (int i = 0; i < batch; ++i) call();
    times.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / batch);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void sweep(fiber::ring_member& me) {
  for (std::size_t bytes = 8; bytes <= (std::size_t{64} << 20); bytes *= 8) {
    std::vector<float> v(bytes / sizeof(float), 1.0f);
    auto t = median_us(me, bytes, [&] { me.allreduce(std::span<float>(v)); });
    if (me.rank() == 0) std::printf("allreduce bytes=%zu us=%.2f\n", bytes, t);
    auto b = median_us(me, bytes, [&] { me.broadcast(std::span<float>(v), 0); });
    if (me.rank() == 0) std::printf("broadcast bytes=%zu us=%.2f\n", bytes, b);
    std::vector<float> all(v.size() * static_cast<std::size_t>(me.size()));
    auto g = median_us(me, bytes, [&] { me.allgather(std::span<const float>(v), std::span<float>(all)); });
    if (me.rank() == 0) std::printf("allgather bytes=%zu us=%.2f\n", bytes, g);
    std::fflush(stdout);
  }
  auto t = median_us(me, 0, [&] { me.barrier(); });
  if (me.rank() == 0) std::printf("barrier bytes=0 us=%.2f\n", t);
  std::fflush(stdout);
}
// A data-parallel step: compute, then average an 8 MB gradient. Blocking: one after the other.
// Async: the previous step's gradient is reduced (async_allreduce) while this step computes. The
// compute is calibrated to take about as long as the allreduce, where overlap can halve a step.
void overlap(fiber::ring_member& me) {
  std::vector<float> grad(std::size_t{2} << 20, 1.0f), other(grad.size(), 1.0f), work(1 << 15, 1.0f);
  auto compute = [&](int rounds) {
    for (int k = 0; k < rounds; ++k)
      for (auto& x : work) x = x * 0.999f + 0.001f;
  };
  auto allreduce_us = median_us(me, 8 << 20, [&] { me.allreduce(std::span<float>(grad)); });
  auto t0 = clock_type::now();
  compute(100);
  double per_round = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / 100;
  int rounds = std::max(1, static_cast<int>(allreduce_us / per_round));
  // Every member computes the same amount (rank 0's calibration).
  std::vector<int> agreed{rounds};
  me.broadcast(std::span<int>(agreed), 0);
  rounds = agreed[0];
  auto compute_us = median_us(me, 8 << 20, [&] { compute(rounds); });
  auto blocking_us = median_us(me, 8 << 20, [&] {
    compute(rounds);
    me.allreduce(std::span<float>(grad));
  });
  auto async_us = median_us(me, 8 << 20, [&] {
    auto reduced = me.async_allreduce(std::span<float>(grad));
    compute(rounds);  // this step's gradient goes to `other` meanwhile
    std::move(reduced).get();
    std::swap(grad, other);
  });
  if (me.rank() == 0)
    std::printf("overlap members=%d allreduce_us=%.0f compute_us=%.0f blocking_step_us=%.0f async_step_us=%.0f "
                "async/blocking=%.2f\n",
                me.size(), allreduce_us, compute_us, blocking_us, async_us, async_us / blocking_us);
  std::fflush(stdout);
}
}  // namespace
FIBER_REMOTE(sweep);
FIBER_REMOTE(overlap);

//   build/bench/ring_bench [members=4] [sweep|overlap]
int main(int argc, char** argv) {
  fiber::init(argc, argv);
  int members = argc > 1 ? std::atoi(argv[1]) : 4;
  bool overlap_only = argc > 2 && std::string(argv[2]) == "overlap";
  fiber::ring r(members, overlap_only ? &overlap : &sweep);
  r.start().get();
  r.join().get();
}
