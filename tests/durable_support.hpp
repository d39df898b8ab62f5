// What the durable-run tests share: tests/durable_program run as a master of its own (directly, or
// by the fiber command), the waits on its journal and its workers, and what a run taken up again
// must have run.
#pragma once
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/run_journal.hpp"
#include "folder_wait.hpp"
#include "primitives/pool/map_journal.hpp"
#include "run_folder.hpp"

extern char** environ;

namespace fiber_test {
namespace fs = std::filesystem;
using fiber::detail::journal_record;
using fiber::detail::map_journal;

struct program_outcome {
  int status = -1;  // the exit code, or -signal
  std::string out;
  /// What the program printed after its pid: its results, or its error.
  std::string said() const {
    auto nl = out.find('\n');
    return nl == std::string::npos ? out : out.substr(nl + 1);
  }
};

/// A run of durable_program in `folder` (its journal, executions and gate there) as run `run_id`.
class durable_case {
 public:
  explicit durable_case(const std::string& name) : folder_(fiber_test::run_folder() / "durable" / name) {
    fs::create_directories(folder_);
  }
  fs::path journals() const { return folder_ / "journals"; }
  fs::path executions_file() const { return folder_ / "executions"; }
  fs::path journal(const std::string& run_id) const { return journals() / (run_id + ".journal"); }
  fs::path gate() const { return folder_ / "gate"; }
  /// How long the workers of the masters start() starts wait for a master taking the run up
  /// (config reattach_grace_ms; its default when not set).
  void reattach_grace_ms(const std::string& ms) { grace_ms_ = ms; }
  /// The pool's processes in the programs start() starts from now on (2 when not set).
  void processes(const std::string& n) { processes_ = n; }
  /// How often the masters start() starts from now on make their journal durable (config
  /// journal_sync_ms; its default when empty).
  void journal_sync_ms(const std::string& ms) { sync_ms_ = ms; }
  /// Whether the first map's results of the programs start() starts from now on are large
  /// (durable_program.cpp).
  void large_first(bool on) { large_first_ = on; }
  void open_gate() const { std::ofstream(gate()) << "open"; }

  /// Starts the program as run `run_id`; its stdout is read by line() and finish(). With
  /// `through` (the fiber command's words before "--"), `fiber run` starts it, and makes the run id
  /// when `run_id` is empty.
  pid_t start(const std::string& run_id, const std::string& shift = "0", std::vector<std::string> through = {}) {
    // The backend under test is this process's (FIBER_BACKEND, FIBER_IMAGE, ...: test_main.cpp);
    // the durable keys are this case's.
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      std::string_view kv(*e);
      bool mine = false;
      for (auto key : {"FIBER_DURABLE=", "FIBER_RUN_ID=", "FIBER_JOURNAL_DIR=", "FIBER_RECORD_DIR=", "FIBER_REATTACH_GRACE_MS=",
                       "FIBER_JOURNAL_SYNC_MS=", "FIBERTEST_LARGE_FIRST="})
        mine |= kv.starts_with(key);
      if (!mine) env.emplace_back(kv);
    }
    if (!grace_ms_.empty()) env.push_back("FIBER_REATTACH_GRACE_MS=" + grace_ms_);
    if (!sync_ms_.empty()) env.push_back("FIBER_JOURNAL_SYNC_MS=" + sync_ms_);
    if (large_first_) env.push_back("FIBERTEST_LARGE_FIRST=1");
    if (through.empty()) env.push_back("FIBER_DURABLE=1");
    if (!run_id.empty()) env.push_back("FIBER_RUN_ID=" + run_id);
    env.push_back("FIBER_JOURNAL_DIR=" + journals().string());
    env.push_back("FIBER_RECORD_DIR=" + (folder_ / "runs").string());
    bool command = !through.empty();
    std::vector<std::string> args = std::move(through);
    if (command) args.push_back("--");
    for (std::string a : {std::string(FIBER_TEST_DURABLE_PROGRAM), (folder_ / "executions").string(), gate().string(), shift})
      args.push_back(a);
    if (!processes_.empty()) args.push_back(processes_);
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return -1;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    if (command) posix_spawn_file_actions_adddup2(&actions, out[1], 2);  // the fiber command's words too
    pid_t pid = -1;
    if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data()) != 0) pid = -1;
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    out_ = out[0];
    return pid;
  }
  /// The next line the program printed ("" at its end).
  std::string line() {
    char buf[4096];
    for (ssize_t n; seen_.find('\n') == std::string::npos && (n = ::read(out_, buf, sizeof buf)) > 0;)
      seen_.append(buf, static_cast<std::size_t>(n));
    auto nl = seen_.find('\n');
    if (nl == std::string::npos) return {};
    auto l = seen_.substr(0, nl);
    seen_.erase(0, nl + 1);
    return l;
  }
  program_outcome finish(pid_t pid) {
    program_outcome o;
    o.out = std::exchange(seen_, {});
    char buf[4096];
    for (ssize_t n; (n = ::read(out_, buf, sizeof buf)) > 0;) o.out.append(buf, static_cast<std::size_t>(n));
    ::close(out_);
    int status = 0;
    ::waitpid(pid, &status, 0);
    o.status = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return o;
  }
  /// The exit status of a program killed (-signal), without reading its output to its end: its
  /// workers share its stdout, and those waiting for a master taking the run up keep it open.
  int reap(pid_t pid) {
    ::close(std::exchange(out_, -1));
    seen_.clear();
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }
  program_outcome run(const std::string& run_id, const std::string& shift = "0") { return finish(start(run_id, shift)); }

  /// Waits until `n` of the second map's items passed the gate (their results are being made).
  void wait_for_passed(int n) const {
    wait_in(folder_, [&] {
      auto ran = executions();
      int passed = 0;
      for (int i = 4; i < 8; ++i) passed += ran["passed " + std::to_string(i)] > 0;
      return passed >= n;
    });
  }
  /// Waits until both workers wait at the gate: two of the second map's items from 4 on began.
  void wait_for_both_at_the_gate() const {
    wait_in(folder_, [&] {
      auto ran = executions();
      int waiting = 0;
      for (int i = 4; i < 8; ++i) waiting += ran["second " + std::to_string(i)] > 0;
      return waiting >= 2;
    });
  }
  /// The processes (the master, the workers that ran a task) that may live: each holds a lock on a file of its own while
  /// it lives (durable_program.cpp).
  std::vector<fs::path> workers() const {
    std::vector<fs::path> out;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(folder_ / "alive", ec)) out.push_back(e.path());
    return out;
  }
  /// Runs `run_id` until the journal holds half the second map's results, both workers wait at
  /// the gate and the journal names them, then SIGKILLs its master and reaps it; returns the
  /// processes that lived then (workers()), once the master is gone.
  std::vector<fs::path> kill_at_the_gate(const std::string& run_id);
  /// Of `alive` (workers()), the masters' files alone.
  static std::vector<fs::path> masters(const std::vector<fs::path>& alive) {
    std::vector<fs::path> out;
    for (auto& p : alive)
      if (p.filename().string().starts_with("master-")) out.push_back(p);
    return out;
  }
  /// Returns once each of `workers` has ended (its lock taken in turn): a killed master's workers
  /// learn of its end from their engine's connection, later than this host does.
  static void wait_for_end(const std::vector<fs::path>& workers) {
    for (auto& w : workers) {
      int fd = ::open(w.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      (void)::flock(fd, LOCK_EX);
      ::close(fd);
    }
  }
  /// Returns once a master that is not one of `old` has started (its lock file is there): the
  /// master its engine started again.
  void wait_for_a_new_master(const std::vector<fs::path>& old) const {
    wait_in(folder_ / "alive", [&] {
      for (auto& p : workers())
        if (p.filename().string().starts_with("master-") && std::find(old.begin(), old.end(), p) == old.end()) return true;
      return false;
    });
  }
  /// How many times each task ran ("first 3" -> 1), by the lines the tasks appended.
  std::map<std::string, int> executions() const {
    std::map<std::string, int> counts;
    std::ifstream in(folder_ / "executions");
    for (std::string line; std::getline(in, line);) ++counts[line];
    return counts;
  }

 private:
  fs::path folder_;
  std::string grace_ms_, processes_, sync_ms_;
  bool large_first_ = false;
  int out_ = -1;
  std::string seen_;  // read by line() and not yet taken
};

/// How many workers the journal at `path` says its masters could find again (each master that
/// took one up writes it again).
inline std::size_t workers_journaled(const fs::path& path) {
  std::size_t n = 0;
  for (auto& r : fiber::detail::read_journal(path).records) n += r.kind == map_journal::pool_worker;
  return n;
}

/// The reattach points of the workers the journal at `path` names, in the order they were written.
inline std::vector<std::string> worker_points(const fs::path& path) {
  std::vector<std::string> out;
  for (auto& r : fiber::detail::read_journal(path).records)
    if (r.kind == map_journal::pool_worker) out.push_back(r.payload.substr(0, r.payload.find('\n')));
  return out;
}

/// Waits until the journal at `path` names `n` workers.
inline void wait_for_workers_journaled(const fs::path& path, std::size_t n) {
  wait_in(path.parent_path(), [&] { return workers_journaled(path) >= n; });
}

/// The results the journal at `path` holds for map `call` of the first pool.
inline std::size_t results_of(const fs::path& path, std::uint32_t call) {
  std::size_t n = 0;
  for (auto& r : fiber::detail::read_journal(path).records)
    if (r.pool == 1 && r.call == call) n += map_journal::results_in(r);
  return n;
}

/// The one journal in `folder` ("" while there is none).
inline fs::path only_journal(const fs::path& folder) {
  std::error_code ec;
  for (auto& e : fs::directory_iterator(folder, ec))
    if (e.path().extension() == ".journal") return e.path();
  return {};
}

/// Waits until the journal at `path` (a folder: the one journal in it) holds `n` results of map
/// `call`.
inline void wait_for_results(const fs::path& path, std::uint32_t call, std::size_t n) {
  bool folder = path.extension() != ".journal";
  auto journal = [&] { return folder ? only_journal(path) : path; };
  wait_in(folder ? path : path.parent_path(), [&] { return !journal().empty() && results_of(journal(), call) >= n; });
}

inline std::vector<fs::path> durable_case::kill_at_the_gate(const std::string& run_id) {
  auto pid = start(run_id);
  EXPECT_GT(pid, 0);
  wait_for_results(journal(run_id), 2, 4);
  wait_for_both_at_the_gate();
  wait_for_workers_journaled(journal(run_id), 2);
  auto old = workers();
  ::kill(pid, SIGKILL);
  EXPECT_EQ(reap(pid), -SIGKILL);
  wait_for_end(masters(old));
  return old;
}

/// What a run whose workers a master taking it up linked again has run: every item of both maps
/// exactly once.
inline void expect_nothing_twice(std::map<std::string, int> ran) {
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(ran["first " + std::to_string(i)], 1) << "the first map's item " << i;
    EXPECT_EQ(ran["second " + std::to_string(i)], 1) << "the second map's item " << i;
  }
}

/// What a run taken up after its master died while the second map waited at the gate has run:
/// the first map's items once in all, the second's first half not again, its second half at
/// least once, and no more than two items (what the two workers were running at the kill) twice.
inline void expect_taken_up(std::map<std::string, int> before, std::map<std::string, int> after) {
  for (int i = 0; i < 8; ++i) EXPECT_EQ(after["first " + std::to_string(i)], 1) << "the first map's item " << i;
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(after["second " + std::to_string(i)], before["second " + std::to_string(i)])
        << "the second map's item " << i << " had its result journaled and ran again";
  int again = 0;
  for (int i = 4; i < 8; ++i) {
    EXPECT_GE(after["second " + std::to_string(i)], 1) << "the second map's item " << i << " never ran";
    again += std::max(0, after["second " + std::to_string(i)] - 1);
  }
  EXPECT_LE(again, 2) << "only the items the two workers were running at the kill run twice";
}

/// The line of `fiber ps`'s table that names run `name` ("" when none does).
inline std::string ps_row(const std::string& table, const std::string& name) {
  auto at = table.find(name + " ");
  if (at == std::string::npos) return {};
  return table.substr(at, table.find('\n', at) - at);
}

const std::string uninterrupted = "0 1 4 9 16 25 36 49 | 1 11 21 31 41 51 61 71\n";

}  // namespace fiber_test
