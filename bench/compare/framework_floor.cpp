// The machine's floor for the framework test of uber/fiber's paper (pool_bench's
// framework_rounds): 5 forked children, each blocked in read() on a pipe of its own; a round
// writes one byte to each, every child sleeps D and answers with a byte, and the round ends when
// all five have answered. No serialization, no event loop: what is left above the calibrated
// ideal is the machine's own (timer wake-ups of sleeping processes, the scheduler), which no
// library on it can go below.
// Prints: framework floor D_us=1000 ratio_to_ideal=R ovh_per_round_us=U (three runs, then the median).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace {
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// Same calibration as pool_bench: the mean length of a sleep of `us` on this machine.
double measured_sleep_s(int us) {
  auto t0 = clock_type::now();
  for (int i = 0; i < 300; ++i) std::this_thread::sleep_for(std::chrono::microseconds(us));
  return seconds_since(t0) / 300;
}
}  // namespace

int main() {
  const int workers = 5, rounds = 200, d_us = 1000, runs = 3;
  std::vector<int> to(workers), from(workers);
  for (int i = 0; i < workers; ++i) {
    int down[2], up[2];
    if (::pipe(down) != 0 || ::pipe(up) != 0) return 1;
    if (::fork() == 0) {
      char c;
      while (::read(down[0], &c, 1) == 1 && c != 'q') {
        std::this_thread::sleep_for(std::chrono::microseconds(d_us));
        if (::write(up[1], &c, 1) != 1) _exit(1);
      }
      _exit(0);
    }
    ::close(down[0]);
    ::close(up[1]);
    to[i] = down[1];
    from[i] = up[0];
  }
  const double d_cal = measured_sleep_s(d_us);
  std::vector<double> ratios, overheads;
  for (int run = 0; run < runs; ++run) {
    auto t0 = clock_type::now();
    for (int r = 0; r < rounds; ++r) {
      for (int fd : to)
        if (::write(fd, "x", 1) != 1) return 1;
      char c;
      for (int fd : from)
        if (::read(fd, &c, 1) != 1) return 1;
    }
    double wall = seconds_since(t0);
    ratios.push_back(wall / (rounds * d_cal));
    overheads.push_back((wall - rounds * d_cal) / rounds * 1e6);
    std::printf("framework floor D_us=%d run=%d ratio_to_ideal=%.3f ovh_per_round_us=%.1f\n", d_us, run + 1,
                ratios.back(), overheads.back());
    std::fflush(stdout);
  }
  for (int fd : to)  // each child also holds the pipes made before it: it is told to go
    if (::write(fd, "q", 1) != 1) return 1;
  while (::wait(nullptr) > 0) {
  }
  std::sort(ratios.begin(), ratios.end());
  std::sort(overheads.begin(), overheads.end());
  std::printf("framework floor D_us=%d median ratio_to_ideal=%.3f ovh_per_round_us=%.1f\n", d_us, ratios[runs / 2],
              overheads[runs / 2]);
}
