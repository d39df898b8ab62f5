// How long a durable run's master, started again after its master was SIGKILLed, takes to finish
// the map it was in, with its workers taken up (reattach_grace_ms on) or started anew (0), side by
// side in one run. The map: one item per worker, each waiting for a gate file; the master is
// killed once every item waits, the gate is opened, and the master is started again with the same
// run id: taken up, the workers hand over the results they made meanwhile; started anew, they run
// the items again. What is timed is the second master's whole life, from its exec to its exit.
//   reattach_bench [WORKERS=64] [ROUNDS=3]
#include <fcntl.h>
#include <fiber/fiber.hpp>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/run_journal.hpp"
#include "primitives/pool/map_journal.hpp"

namespace fs = std::filesystem;
extern char** environ;

namespace {
void note(const std::string& file, const std::string& line) {
  int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  auto text = line + "\n";
  (void)!::write(fd, text.data(), text.size());
  ::close(fd);
}

std::size_t lines_in(const fs::path& file) {
  std::ifstream in(file);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

/// Returns once `done()` holds, looked at each time `folder` changes.
template <class Pred>
void wait_in(const fs::path& folder, Pred done) {
  int fd = ::inotify_init1(IN_CLOEXEC);
  ::inotify_add_watch(fd, folder.c_str(), IN_MODIFY | IN_CREATE | IN_CLOSE_WRITE);
  char events[4096];
  while (!done()) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) (void)!::read(fd, events, sizeof events);  // a journal is synced, not closed
  }
  ::close(fd);
}
}  // namespace

long held_item(long x, std::string folder) {
  note(folder + "/waiting", std::to_string(x));
  auto gate = folder + "/gate";
  wait_in(folder, [&] { return fs::exists(gate); });
  note(folder + "/passed", std::to_string(x));
  return x;
}
FIBER_REMOTE(held_item);

namespace {
int run_master(const std::string& folder, int workers) {
  // One chunk at a time each: every item runs at once, none waits behind another.
  fiber::pool pool(fiber::pool_options{.processes = workers, .prefetch = 0});
  std::vector<std::tuple<long, std::string>> items;
  for (long x = 0; x < workers; ++x) items.emplace_back(x, folder);
  auto out = pool.starmap(&held_item, items, 1).get();
  return static_cast<int>(out.size()) == workers ? 0 : 1;
}

pid_t start_master(const char* self, const fs::path& folder, int workers, const std::string& run_id, int grace_ms) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  env.push_back("FIBER_DURABLE=1");
  env.push_back("FIBER_RUN_ID=" + run_id);
  env.push_back("FIBER_JOURNAL_DIR=" + (folder / "journals").string());
  env.push_back("FIBER_REATTACH_GRACE_MS=" + std::to_string(grace_ms));
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string a0 = self, a1 = "--master", a2 = folder.string(), a3 = std::to_string(workers);
  char* argv[] = {a0.data(), a1.data(), a2.data(), a3.data(), nullptr};
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 2);  // the run id line, and the workers' words on their master's end
    ::execve(self, argv, envp.data());
    ::_exit(127);
  }
  return pid;
}

std::size_t journaled_workers(const fs::path& journal) {
  std::size_t n = 0;
  for (auto& r : fiber::detail::read_journal(journal).records) n += r.kind == fiber::detail::map_journal::pool_worker;
  return n;
}

/// One case: the second master's life in seconds, or -1 when a master failed.
double one_case(const char* self, const fs::path& root, int workers, const std::string& name, int grace_ms) {
  auto folder = root / name;
  fs::create_directories(folder / "journals");
  auto first = start_master(self, folder, workers, name, grace_ms);
  wait_in(folder, [&] { return lines_in(folder / "waiting") >= static_cast<std::size_t>(workers); });
  if (grace_ms) {  // the journal names every worker before the master goes
    auto journal = folder / "journals" / (name + ".journal");
    wait_in(folder / "journals", [&] { return journaled_workers(journal) >= static_cast<std::size_t>(workers); });
  }
  ::kill(first, SIGKILL);
  ::waitpid(first, nullptr, 0);
  note((folder / "gate").string(), "open");
  // Taken up, the workers make their results with no master; started anew, they are gone.
  if (grace_ms) wait_in(folder, [&] { return lines_in(folder / "passed") >= static_cast<std::size_t>(workers); });
  auto t0 = std::chrono::steady_clock::now();
  auto second = start_master(self, folder, workers, name, grace_ms);
  int status = 0;
  ::waitpid(second, &status, 0);
  auto s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? s : -1;
}
}  // namespace

int main(int argc, char** argv) {
  fiber::init(argc, argv);
  if (argc >= 4 && std::string(argv[1]) == "--master") return run_master(argv[2], std::atoi(argv[3]));
  int workers = argc > 1 ? std::atoi(argv[1]) : 64, rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  char root_template[] = "/tmp/reattach-bench-XXXXXX";
  fs::path root = ::mkdtemp(root_template);
  std::printf("%d workers; seconds from the second master's exec to its exit (the map's end)\n", workers);
  std::printf("%-6s %12s %12s %8s\n", "round", "taken up", "started anew", "ratio");
  std::vector<double> up, anew;
  for (int r = 0; r < rounds; ++r) {
    // Alternated, so that the machine's pace moves both alike.
    double a = 0, b = 0;
    if (r % 2 == 0) {
      a = one_case(argv[0], root, workers, "up" + std::to_string(r), 60000);
      b = one_case(argv[0], root, workers, "anew" + std::to_string(r), 0);
    } else {
      b = one_case(argv[0], root, workers, "anew" + std::to_string(r), 0);
      a = one_case(argv[0], root, workers, "up" + std::to_string(r), 60000);
    }
    up.push_back(a);
    anew.push_back(b);
    std::printf("%-6d %12.3f %12.3f %8.2f\n", r + 1, a, b, b > 0 ? a / b : 0.0);
    std::fflush(stdout);
  }
  std::sort(up.begin(), up.end());
  std::sort(anew.begin(), anew.end());
  auto mid = static_cast<std::size_t>(rounds / 2);
  std::printf("median %12.3f %12.3f %8.2f\n", up[mid], anew[mid], up[mid] / anew[mid]);
  fs::remove_all(root);
  return 0;
}
