// main() of the benchmarks: fiber::init first, since workers re-execute the binary.
#include <benchmark/benchmark.h>
#include <fiber/fiber.hpp>

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
