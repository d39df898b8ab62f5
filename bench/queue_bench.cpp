// Master <-> one child: 16-byte round trip and 1 MB bulk, over simple_queue and pipe.
// The workload of the multiprocessing anchor queue_pingpong.py that bench/compare/run.sh runs beside it.
#include <benchmark/benchmark.h>
#include <fiber/fiber.hpp>

namespace {
const std::string small = "ping-0123456789!";  // 16 bytes
const std::string flush = "FLUSH";

// Echoes small messages, counts large ones, answers FLUSH with the count; "" ends.
template <class Get, class Put>
void child_loop(Get get, Put put) {
  long n = 0;
  for (;;) {
    auto m = get();
    if (m.empty()) return;
    if (m == flush) {
      put(std::to_string(n));
      n = 0;
    } else if (m.size() > 1024) {
      ++n;
    } else {
      put(std::move(m));
    }
  }
}
void queue_child(fiber::simple_queue<std::string> in, fiber::simple_queue<std::string> out) {
  child_loop([&] { return in.get().get(); }, [&](std::string s) { out.put(std::move(s)).get(); });
}
void pipe_child(fiber::connection<std::string> end) {
  child_loop([&] { return end.recv().get(); }, [&](std::string s) { end.send(std::move(s)).get(); });
}
}  // namespace
FIBER_REMOTE(queue_child);
FIBER_REMOTE(pipe_child);

namespace {
struct queue_pair {
  fiber::simple_queue<std::string> to, from;
  fiber::process child{&queue_child, to, from};
  queue_pair() { child.start().get(); }
  ~queue_pair() {
    to.put("").get();
    child.join().get();
  }
  void send(std::string s) { to.put(std::move(s)).get(); }
  std::string recv() { return from.get().get(); }
};
struct pipe_pair {
  std::pair<fiber::connection<std::string>, fiber::connection<std::string>> ends = fiber::pipe<std::string>();
  fiber::process child{&pipe_child, ends.second};
  pipe_pair() { child.start().get(); }
  ~pipe_pair() {
    ends.first.send("").get();
    child.join().get();
  }
  void send(std::string s) { ends.first.send(std::move(s)).get(); }
  std::string recv() { return ends.first.recv().get(); }
};

template <class Pair>
void round_trip(benchmark::State& state) {
  Pair p;
  for (int i = 0; i < 200; ++i) {  // warm-up
    p.send(small);
    p.recv();
  }
  for (auto _ : state) {
    p.send(small);
    benchmark::DoNotOptimize(p.recv());
  }
}

// Each iteration sends a batch of 1 MB messages and waits until the child has them all, so the
// time covers delivery, not just handing messages to an unbounded queue.
template <class Pair>
void bulk(benchmark::State& state) {
  Pair p;
  const std::string megabyte(1000000, 'x');
  const long batch = 20;
  for (auto _ : state) {
    for (long i = 0; i < batch; ++i) p.send(megabyte);
    p.send(flush);
    if (std::stol(p.recv()) != batch) state.SkipWithError("child saw a different count");
  }
  state.SetBytesProcessed(state.iterations() * batch * static_cast<long>(megabyte.size()));
}
}  // namespace

BENCHMARK(round_trip<queue_pair>)->Name("simple_queue_rtt_16B")->Unit(benchmark::kMicrosecond)->UseRealTime()->Iterations(10000)->Repetitions(3);
BENCHMARK(round_trip<pipe_pair>)->Name("pipe_rtt_16B")->Unit(benchmark::kMicrosecond)->UseRealTime()->Iterations(10000)->Repetitions(3);
BENCHMARK(bulk<queue_pair>)->Name("simple_queue_bulk_1MB")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(10)->Repetitions(3);
BENCHMARK(bulk<pipe_pair>)->Name("pipe_bulk_1MB")->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(10)->Repetitions(3);
