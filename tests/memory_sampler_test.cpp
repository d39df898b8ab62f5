// When a process's memory is sampled (runtime/observe/memory_sampler), on a real io_context and
// its real timers: the first tick samples; a worker's sampler with no work since its last sample
// takes no sample and leaves the io_context nothing to wait for (no wake-up while it sleeps);
// work wakes it, and its next tick samples; the top master's never sleeps; stop() ends the ticks.
#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <chrono>

#include "runtime/observe/memory_sampler.hpp"

namespace {
using fiber::detail::memory_sampler;
using namespace std::chrono_literals;

TEST(memory_sampler, a_worker_with_no_work_sleeps_and_its_next_work_wakes_it) {
  asio::io_context io;
  int samples = 0;
  memory_sampler s(io, 1ms, /*sleeps=*/true, [&] { ++samples; });
  s.start();
  io.run_one();  // the first tick
  EXPECT_EQ(samples, 1);
  io.run_one();  // the next: nothing was done since
  EXPECT_EQ(samples, 1);
  EXPECT_TRUE(s.dormant());
  io.restart();
  EXPECT_EQ(io.run(), 0u) << "a sleeping sampler left a timer: the worker would still wake";
  s.worked();
  EXPECT_FALSE(s.dormant());
  io.restart();
  io.run_one();
  EXPECT_EQ(samples, 2) << "the work's tick samples";
  io.run_one();
  EXPECT_TRUE(s.dormant());
}

TEST(memory_sampler, work_between_ticks_keeps_a_worker_sampled) {
  asio::io_context io;
  int samples = 0;
  memory_sampler s(io, 1ms, true, [&] { ++samples; });
  s.start();
  for (int tick = 0; tick < 3; ++tick) {
    s.worked();
    io.run_one();
  }
  EXPECT_EQ(samples, 3);
  EXPECT_FALSE(s.dormant());
}

TEST(memory_sampler, the_masters_sampler_never_sleeps_and_stop_ends_it) {
  asio::io_context io;
  int samples = 0;
  memory_sampler s(io, 1ms, /*sleeps=*/false, [&] { ++samples; });
  s.start();
  for (int tick = 0; tick < 3; ++tick) io.run_one();
  EXPECT_EQ(samples, 3);
  s.stop();
  io.restart();
  io.run();  // the cancelled wait ends at once
  EXPECT_EQ(samples, 3);
}

}  // namespace
