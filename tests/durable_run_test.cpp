// Durable runs, end to end with real processes: tests/durable_program (two maps on two workers)
// runs as its own master; its master is SIGKILLed once the journal holds half the second map's
// results (the moment read from the journal itself, woken by inotify), then the program runs
// again with the same run id. Its output equals an uninterrupted run's, the first map runs no task
// again, and of the second map only the items without a journaled result run, each at most once
// more. A run taken up with other inputs fails naming them; a torn tail is taken up to its last
// whole record; a run that ended is answered from its journal without a task.
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
#include "primitives/pool/map_journal.hpp"
#include "run_folder.hpp"

extern char** environ;

namespace {
namespace fs = std::filesystem;
using fiber::detail::journal_record;
using fiber::detail::map_journal;

struct outcome {
  int status = -1;  // the exit code, or -signal
  std::string out;
  /// What the program printed after its pid: its results, or its error.
  std::string said() const {
    auto nl = out.find('\n');
    return nl == std::string::npos ? out : out.substr(nl + 1);
  }
};

/// Waits until `done()` holds, checked at each change in `folder` (inotify), never on a timer.
template <class Pred>
void wait_in(const fs::path& folder, Pred done) {
  fs::create_directories(folder);
  int fd = ::inotify_init1(IN_CLOEXEC);
  ::inotify_add_watch(fd, folder.c_str(), IN_MODIFY | IN_CREATE | IN_CLOSE_WRITE);
  char events[4096];
  while (!done()) (void)!::read(fd, events, sizeof events);
  ::close(fd);
}

/// A run of durable_program in `folder` (its journal, executions and gate there) as run `run_id`.
class durable_case {
 public:
  explicit durable_case(const std::string& name) : folder_(fiber_test::run_folder() / "durable" / name) {
    fs::create_directories(folder_);
  }
  fs::path journals() const { return folder_ / "journals"; }
  fs::path journal(const std::string& run_id) const { return journals() / (run_id + ".journal"); }
  fs::path gate() const { return folder_ / "gate"; }
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
      for (auto key : {"FIBER_DURABLE=", "FIBER_RUN_ID=", "FIBER_JOURNAL_DIR=", "FIBER_RECORD_DIR="}) mine |= kv.starts_with(key);
      if (!mine) env.emplace_back(kv);
    }
    if (through.empty()) env.push_back("FIBER_DURABLE=1");
    if (!run_id.empty()) env.push_back("FIBER_RUN_ID=" + run_id);
    env.push_back("FIBER_JOURNAL_DIR=" + journals().string());
    env.push_back("FIBER_RECORD_DIR=" + (folder_ / "runs").string());
    bool command = !through.empty();
    std::vector<std::string> args = std::move(through);
    if (command) args.push_back("--");
    for (std::string a : {std::string(FIBER_TEST_DURABLE_PROGRAM), (folder_ / "executions").string(), gate().string(), shift})
      args.push_back(a);
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
  outcome finish(pid_t pid) {
    outcome o;
    o.out = std::exchange(seen_, {});
    char buf[4096];
    for (ssize_t n; (n = ::read(out_, buf, sizeof buf)) > 0;) o.out.append(buf, static_cast<std::size_t>(n));
    ::close(out_);
    int status = 0;
    ::waitpid(pid, &status, 0);
    o.status = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return o;
  }
  outcome run(const std::string& run_id, const std::string& shift = "0") { return finish(start(run_id, shift)); }

  /// Waits until both workers wait at the gate: two of the second map's items from 4 on began.
  void wait_for_both_at_the_gate() const {
    wait_in(folder_, [&] {
      auto ran = executions();
      int waiting = 0;
      for (int i = 4; i < 8; ++i) waiting += ran["second " + std::to_string(i)] > 0;
      return waiting >= 2;
    });
  }
  /// The workers that ran a task here and may live: each holds a lock on a file of its own while
  /// it lives (durable_program.cpp).
  std::vector<fs::path> workers() const {
    std::vector<fs::path> out;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(folder_ / "alive", ec)) out.push_back(e.path());
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
  /// How many times each task ran ("first 3" -> 1), by the lines the tasks appended.
  std::map<std::string, int> executions() const {
    std::map<std::string, int> counts;
    std::ifstream in(folder_ / "executions");
    for (std::string line; std::getline(in, line);) ++counts[line];
    return counts;
  }

 private:
  fs::path folder_;
  int out_ = -1;
  std::string seen_;  // read by line() and not yet taken
};

/// The results the journal at `path` holds for map `call` of the first pool.
std::size_t results_of(const fs::path& path, std::uint32_t call) {
  std::size_t n = 0;
  for (auto& r : fiber::detail::read_journal(path).records) n += r.kind == map_journal::map_result && r.pool == 1 && r.call == call;
  return n;
}

/// The one journal in `folder` ("" while there is none).
fs::path only_journal(const fs::path& folder) {
  std::error_code ec;
  for (auto& e : fs::directory_iterator(folder, ec))
    if (e.path().extension() == ".journal") return e.path();
  return {};
}

/// Waits until the journal at `path` (a folder: the one journal in it) holds `n` results of map
/// `call`.
void wait_for_results(const fs::path& path, std::uint32_t call, std::size_t n) {
  bool folder = path.extension() != ".journal";
  auto journal = [&] { return folder ? only_journal(path) : path; };
  wait_in(folder ? path : path.parent_path(), [&] { return !journal().empty() && results_of(journal(), call) >= n; });
}

/// What a run taken up after its master died while the second map waited at the gate has run:
/// the first map's items once in all, the second's first half not again, its second half at
/// least once, and no more than two items (what the two workers were running at the kill) twice.
void expect_taken_up(std::map<std::string, int> before, std::map<std::string, int> after) {
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

const std::string uninterrupted = "0 1 4 9 16 25 36 49 | 1 11 21 31 41 51 61 71\n";

TEST(durable_run, a_master_killed_mid_map_is_taken_up_and_runs_only_what_has_no_result) {
  durable_case c("killed");
  auto pid = c.start("killed");
  ASSERT_GT(pid, 0);
  wait_for_results(c.journal("killed"), 2, 4);  // items 0 to 3 answered
  c.wait_for_both_at_the_gate();
  auto old = c.workers();
  ::kill(pid, SIGKILL);
  auto killed = c.finish(pid);
  EXPECT_EQ(killed.status, -SIGKILL);
  c.wait_for_end(old);  // none of them starts an item once the gate opens
  auto before = c.executions();

  c.open_gate();
  auto again = c.run("killed");
  EXPECT_EQ(again.status, 0) << again.out;
  EXPECT_EQ(again.said(), uninterrupted);
  expect_taken_up(before, c.executions());
}

TEST(durable_run, a_run_that_ended_is_answered_from_its_journal_without_a_task) {
  durable_case c("ended");
  c.open_gate();
  auto first = c.run("ended");
  ASSERT_EQ(first.status, 0) << first.out;
  EXPECT_EQ(first.said(), uninterrupted);
  auto once = c.executions();
  auto again = c.run("ended");
  EXPECT_EQ(again.status, 0) << again.out;
  EXPECT_EQ(again.said(), uninterrupted);
  EXPECT_EQ(c.executions(), once) << "a task ran in a run whose every result was journaled";
}

TEST(durable_run, other_inputs_for_a_journaled_map_fail_naming_the_items_and_the_fix) {
  durable_case c("changed");
  c.open_gate();
  ASSERT_EQ(c.run("changed").status, 0);
  auto changed = c.run("changed", "1");
  EXPECT_EQ(changed.status, 3) << changed.out;
  EXPECT_NE(changed.said().find("other inputs for items 0 to 0 of map 1 of pool 1"), std::string::npos) << changed.out;
  EXPECT_NE(changed.said().find("another run_id"), std::string::npos) << changed.out;
}

TEST(durable_run, a_journal_with_a_torn_tail_is_taken_up_to_its_last_whole_record) {
  durable_case c("torn");
  auto pid = c.start("torn");
  ASSERT_GT(pid, 0);
  wait_for_results(c.journal("torn"), 2, 4);
  c.wait_for_both_at_the_gate();
  auto old = c.workers();
  ::kill(pid, SIGKILL);
  (void)c.finish(pid);
  c.wait_for_end(old);
  auto whole = fiber::detail::read_journal(c.journal("torn"));
  {
    // What a master killed in the middle of a write leaves: a record's first bytes.
    std::ofstream tail(c.journal("torn"), std::ios::binary | std::ios::app);
    tail << std::string("\x40\x00\x00\x00\x12\x34", 6);
  }
  ASSERT_TRUE(fiber::detail::read_journal(c.journal("torn")).torn);
  auto before = c.executions();
  c.open_gate();
  auto again = c.run("torn");
  EXPECT_EQ(again.status, 0) << again.out;
  EXPECT_EQ(again.said(), uninterrupted);
  expect_taken_up(before, c.executions());
  auto read = fiber::detail::read_journal(c.journal("torn"));
  EXPECT_FALSE(read.torn);
  EXPECT_GT(read.records.size(), whole.records.size());
}

TEST(durable_run_command, fiber_run_restarts_a_master_killed_by_a_signal_with_the_same_run_id) {
  durable_case c("restarted");
  auto runner = c.start("", "0", {FIBER_TEST_CLI, "run", "--backend", "local", "--durable", "--restarts", "1"});
  ASSERT_GT(runner, 0);
  std::string first;
  while (!(first = c.line()).empty() && first.rfind("master ", 0) != 0) {
  }
  ASSERT_EQ(first.rfind("master ", 0), 0u) << "the master never started";
  wait_for_results(c.journals(), 2, 4);
  c.wait_for_both_at_the_gate();
  auto old = c.workers();
  ::kill(std::stoi(first.substr(7)), SIGKILL);
  c.wait_for_end(old);  // the restarted master's own wait at the gate meanwhile
  auto before = c.executions();
  c.open_gate();
  auto ended = c.finish(runner);
  EXPECT_EQ(ended.status, 0) << ended.out;
  auto lines = ended.out;
  EXPECT_EQ(lines.substr(lines.rfind('\n', lines.size() - 2) + 1), uninterrupted) << ended.out;
  EXPECT_NE(lines.find("the master died by signal 9"), std::string::npos) << ended.out;
  EXPECT_NE(lines.find("master "), std::string::npos) << "the master was not started again: " << ended.out;
  std::size_t journals = 0;
  for (auto& e : fs::directory_iterator(c.journals())) journals += e.path().extension() == ".journal";
  EXPECT_EQ(journals, 1u) << "the master started again under another run id";
  expect_taken_up(before, c.executions());
}

TEST(durable_run_command, restarts_without_durable_are_refused_naming_the_flag) {
  durable_case c("refused");
  auto runner = c.start("", "0", {FIBER_TEST_CLI, "run", "--backend", "local", "--restarts", "1"});
  ASSERT_GT(runner, 0);
  auto ended = c.finish(runner);
  EXPECT_NE(ended.status, 0);
  EXPECT_NE(ended.out.find("--restarts starts a master again to take its run up from the journal: add --durable"),
            std::string::npos) << ended.out;
  EXPECT_TRUE(c.executions().empty()) << "the program ran";
}

}  // namespace
