// A durable run's program for durable_run_test: two maps on a pool of two workers, each task
// appending a line to an executions file (who ran, which item) before it answers. Items 4 to 7 of
// the second map wait, before they answer, until a gate file exists: with the gate absent, the
// second map holds half its results when its master is killed; past the gate each notes "passed N".
// It prints every result and exits
// 0; its first line is its pid ("master 123"); a fiber::error is printed ("error: ...") and ends it with 3.
//   durable_program EXECUTIONS GATE [SHIFT [PROCESSES]]   (SHIFT: added to the first map's inputs;
//   PROCESSES: the pool's, 2 by default)
// With FIBERTEST_LARGE_FIRST=1 in its environment, the first map's results are 100 kB each (the
// journal writes each at once), made once GATE.first exists; it prints the same squares when they
// came back whole, and waits for GATE.between to exist before the second map.
#include <fcntl.h>
#include <fiber/fiber.hpp>
#include <sys/file.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace {
/// While this process (a worker, or the master) lives it holds a shared lock on a file of its own beside the executions: the
/// test takes each such lock to know that a killed master and its workers are gone (a worker's
/// engine may see its master's end later than this host does).
void hold_alive_lock(const std::string& executions, const char* who = "worker") {
  static bool held = false;
  if (held) return;
  held = true;
  auto folder = std::filesystem::path(executions).parent_path() / "alive";
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  // A master its engine starts again in the same container has the same host name and pid: a
  // word of its own tells its file from the last life's.
  auto path = folder / (std::string(who) + "-" + host + "-" + std::to_string(::getpid()) + "-" +
                        std::to_string(std::random_device{}()));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) (void)::flock(fd, LOCK_SH);  // kept open: the kernel lets it go when this process ends
}

void note(const std::string& executions, const std::string& line) {
  hold_alive_lock(executions);
  int fd = ::open(executions.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  auto text = line + "\n";
  (void)!::write(fd, text.data(), text.size());  // one write: lines from two workers never mix
  ::close(fd);
}

/// Waits, without a timer, until `gate` exists (its folder's inotify says when it is made).
void wait_for(const std::string& gate) {
  int fd = ::inotify_init1(IN_CLOEXEC);
  auto folder = std::filesystem::path(gate).parent_path();
  ::inotify_add_watch(fd, folder.c_str(), IN_CREATE | IN_MOVED_TO);
  char events[4096];
  while (!std::filesystem::exists(gate)) (void)!::read(fd, events, sizeof events);
  ::close(fd);
}
}  // namespace

long first(long x, std::string executions) {
  note(executions, "first " + std::to_string(x));
  return x * x;
}
long second(long x, std::string executions, std::string gate) {
  note(executions, "second " + std::to_string(x));
  if (x >= 4) {
    wait_for(gate);
    note(executions, "passed " + std::to_string(x));  // the test knows its result is being made
  }
  return 10 * x + 1;
}
std::string first_large(long x, std::string executions, std::string gate) {
  note(executions, "first " + std::to_string(x));
  wait_for(gate + ".first");  // the test opens it once both workers run one of these
  return std::string(100000, static_cast<char>('a' + x % 26));
}
FIBER_REMOTE(first);
FIBER_REMOTE(first_large);
FIBER_REMOTE(second);

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  if (argc < 3) {
    std::fprintf(stderr, "usage: durable_program EXECUTIONS GATE [SHIFT]\n");
    return 2;
  }
  std::string executions = argv[1], gate = argv[2];
  long shift = argc > 3 ? std::stol(argv[3]) : 0;
  int processes = argc > 4 ? std::stoi(argv[4]) : 2;
  hold_alive_lock(executions, "master");  // the test knows when a killed or requeued master is gone
  std::printf("master %d\n", static_cast<int>(::getpid()));  // whom to kill, when run by `fiber run`
  std::fflush(stdout);
  try {
    fiber::pool pool(fiber::pool_options{.processes = processes});
    std::vector<std::tuple<long, std::string>> inputs;
    for (long x = 0; x < 8; ++x) inputs.emplace_back(x + shift, executions);
    std::vector<long> squares;
    if (const char* large = std::getenv("FIBERTEST_LARGE_FIRST"); large && std::string(large) == "1") {
      std::vector<std::tuple<long, std::string, std::string>> large_inputs;
      for (auto& [x, e] : inputs) large_inputs.emplace_back(x, e, gate);
      auto large_results = pool.starmap(&first_large, large_inputs, 1).get();
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        long x = std::get<0>(inputs[i]);
        squares.push_back(large_results[i] == std::string(100000, static_cast<char>('a' + x % 26)) ? x * x : -1);
      }
      wait_for(gate + ".between");
    } else {
      squares = pool.starmap(&first, inputs, 1).get();
    }
    std::vector<std::tuple<long, std::string, std::string>> items;
    for (long x = 0; x < 8; ++x) items.emplace_back(x, executions, gate);
    auto tens = pool.starmap(&second, items, 1).get();
    for (auto v : squares) std::printf("%ld ", v);
    std::printf("|");
    for (auto v : tens) std::printf(" %ld", v);
    std::printf("\n");
  } catch (const fiber::error& e) {
    std::printf("error: %s\n", e.what());
    return 3;
  }
  return 0;
}
