// What fiber's operations cost with no I/O: a put and a get on a queue, and a send and a recv on
// a pipe, both ends in this process (the master owns the channels, so nothing leaves it). What is
// measured is the op machinery (the op, its completion, the loop's drive), the codec and the
// broker: the part of a round trip that is fiber's own code.
#include <benchmark/benchmark.h>
#include <fiber/fiber.hpp>

namespace {
const std::string small = "ping-0123456789!";  // 16 bytes, as queue_bench's round trips

void queue_put_get_in_process(benchmark::State& state) {
  fiber::simple_queue<std::string> q;
  for (auto _ : state) {
    q.put(small).get();
    benchmark::DoNotOptimize(q.get().get());
  }
}
BENCHMARK(queue_put_get_in_process);

void pipe_send_recv_in_process(benchmark::State& state) {
  auto [a, b] = fiber::pipe<std::string>();
  for (auto _ : state) {
    a.send(small).get();
    benchmark::DoNotOptimize(b.recv().get());
  }
}
BENCHMARK(pipe_send_recv_in_process);
}  // namespace
