// Running other programs: a scheduler's command-line tools (sbatch, squeue, scancel, srun), with
// pipes to their standard streams, blocking or on a thread of their own so the loop never waits.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fiber/detail/unique_function.hpp"

namespace asio {
class io_context;
}

namespace fiber::detail {

/// This process's environment with `added` set (replacing what it held under those names), as
/// "K=V" strings.
std::vector<std::string> environment_with(const std::vector<std::pair<std::string, std::string>>& added);

/// A started program and the ends of its pipes this process holds (-1: not piped).
struct spawned_command {
  pid_t pid = 0;
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;
};

struct command_io {
  bool pipe_stdin = false;   // else /dev/null
  bool pipe_stdout = false;  // else inherited
  bool pipe_stderr = false;  // else inherited
  const std::vector<std::string>* env = nullptr;  // "K=V" each; null: this process's
};

/// Starts argv[0] (found on PATH). Throws fiber::error(spawn_failed) naming the program when it
/// cannot be started. Only the three standard descriptors pass to it.
spawned_command spawn_command(const std::vector<std::string>& argv, const command_io& io);

struct command_result {
  int code = -1;          // exit code; -N: killed by signal N; -1 with `failure`: not run
  std::string out, err;  // what it wrote
  std::string failure;   // why it could not be run or was stopped (timeout)

  bool ok() const noexcept { return code == 0 && failure.empty(); }
  /// What went wrong, for an error message: `failure`, else stderr (trimmed), else the exit code.
  std::string problem() const;
};

/// Runs argv to its end with `input` on its stdin and returns what it wrote; a program still
/// running after `timeout` is killed (and `failure` says so). Never throws. `env` ("K=V" each;
/// null: this process's) is where a secret for the program goes: another user of the host can
/// read any program's argv (/proc/PID/cmdline), never its environment.
command_result run_command(const std::vector<std::string>& argv, const std::string& input = {},
                           std::chrono::milliseconds timeout = std::chrono::seconds(60),
                           const std::vector<std::string>* env = nullptr);

/// Runs commands one after another on a thread of its own and answers on an io_context. One at a
/// time on purpose: a scheduler's controller is a shared service, and queueing here is gentler
/// than a burst.
class command_thread {
 public:
  explicit command_thread(asio::io_context& io);
  /// Waits for the command in flight; queued ones are dropped, unanswered.
  ~command_thread();
  command_thread(const command_thread&) = delete;

  /// `done` runs on the io_context. `answered`, when given, runs first, on the command thread, as
  /// soon as the command ended (for a caller that must learn the result while blocking the loop).
  void run(std::vector<std::string> argv, std::string input, unique_function<void(command_result)> done,
           unique_function<void(const command_result&)> answered = nullptr);

 private:
  struct state;
  std::shared_ptr<state> state_;
};

/// Quotes `s` for a POSIX shell.
std::string shell_quote(const std::string& s);

}  // namespace fiber::detail
