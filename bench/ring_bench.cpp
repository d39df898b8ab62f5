// Collectives of a fiber::ring, measured inside the members (rank 0 reports), in the format
// bench/compare/mpi_collectives.c prints for Open MPI, so bench/compare/run.sh can set them side
// by side: "<collective> bytes=<B> us=<median time per call>".
//   build/bench/ring_bench [members=4]
// Time per call is the median over repeats of the mean over a batch; allreduce's bus bandwidth
// (nccl-tests' definition) is bytes × 2(N−1)/N ÷ time.
#include <fiber/fiber.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
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
    std::fflush(stdout);
  }
  auto t = median_us(me, 0, [&] { me.barrier(); });
  if (me.rank() == 0) std::printf("barrier bytes=0 us=%.2f\n", t);
  std::fflush(stdout);
}
}  // namespace
FIBER_REMOTE(sweep);

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  int members = argc > 1 ? std::atoi(argv[1]) : 4;
  fiber::ring r(members, &sweep);
  r.start().get();
  r.join().get();
}
