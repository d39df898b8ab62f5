// What a master keeps after a large map: its resident memory right after a map of 1,000,000
// trivial tasks on pool(4), and once the pool has been idle past idle_trim_ms (the process gives
// freed memory back), against the same run with idle_trim_ms=0 (it keeps what it freed, up to
// malloc_keep_mb). Each in a fresh process, alternating; bench/compare/idle_memory.py measures
// multiprocessing's master the same way.
//   idle_memory_bench [ITEMS=1000000] [ROUNDS=2]
//   idle_memory_bench --one ITEMS TRIM_MS     (one measurement, in this process)
#include <fiber/fiber.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace {
int identity(int x) { return x; }

double resident_mb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmRSS:")) return std::stod(line.substr(6)) / 1024;
  return 0;
}

int one(std::size_t items, int trim_ms) {
  fiber::context ctx(fiber::config::load({{"idle_trim_ms", std::to_string(trim_ms)}, {"record", "false"}}));
  fiber::pool p(ctx, 4);
  std::vector<int> xs(items);
  std::iota(xs.begin(), xs.end(), 0);
  auto before = resident_mb();
  {
    auto r = p.map(&identity, xs).get();
    if (r.size() != items) return 1;
  }
  auto after = resident_mb();
  // Idle past the trim's delay (1 s here): what the process holds then. The bench's own wait.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  std::printf("idle_trim_ms=%-5d before the map %6.1f MB  after it %6.1f MB  idle 1.5 s later %6.1f MB\n", trim_ms,
              before, after, resident_mb());
  std::fflush(stdout);
  return 0;
}
}  // namespace
FIBER_REMOTE(identity);

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  if (argc == 4 && std::string(argv[1]) == "--one") return one(std::stoul(argv[2]), std::stoi(argv[3]));
  std::string items = argc > 1 ? argv[1] : "1000000";
  int rounds = argc > 2 ? std::stoi(argv[2]) : 2;
  for (int round = 0; round < rounds; ++round)
    for (const char* trim : round % 2 ? std::vector<const char*>{"0", "1000"} : std::vector<const char*>{"1000", "0"}) {
      pid_t pid = ::fork();
      if (pid == 0) {
        ::execl("/proc/self/exe", argv[0], "--one", items.c_str(), trim, static_cast<char*>(nullptr));
        ::_exit(127);
      }
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
}
