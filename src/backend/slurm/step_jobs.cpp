#include "backend/slurm/step_jobs.hpp"

#include <asio/io_context.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "backend/command.hpp"
#include "backend/engine_run.hpp"
#include "backend/slurm/slurm_cli.hpp"
#include "fiber/config.hpp"
#include "fiber/error.hpp"
#include "core/log.hpp"

namespace fiber::detail::slurm {
namespace {

/// srun reports a task killed by signal N as 128 + N; fiber reports -N on every backend.
int exit_code_of_srun(int status) {
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  int code = WEXITSTATUS(status);
  return code > 128 && code <= 128 + 64 ? -(code - 128) : code;
}

/// One srun: its exit through a pidfd, its stderr (the task's, and srun's own complaints) passed
/// on and its tail kept to explain a failure.
struct step_run final : engine_run, std::enable_shared_from_this<step_run> {
  step_run(asio::io_context& io, spawned_command c, int pidfd, std::shared_ptr<step_jobs::load> counts, std::string on,
           int taken, std::shared_ptr<command_thread> runner, std::string named)
      : engine_run({.queued = false, .identified_later = false}),
        srun_pid(c.pid), exit_fd(io, pidfd), stderr_pipe(io, c.stderr_fd), load(std::move(counts)), node(std::move(on)),
        cpus(taken), commands(std::move(runner)), step_name(std::move(named)) {
    load->cpus[node] += cpus;
  }

  pid_t srun_pid;
  asio::posix::stream_descriptor exit_fd, stderr_pipe;
  std::shared_ptr<step_jobs::load> load;
  std::string node;
  int cpus;
  std::shared_ptr<command_thread> commands;
  std::string step_name;
  bool ended = false, killing = false;
  int code = 0;
  std::string stderr_tail;
  char buf[4096];

  void begin() {
    read_stderr();
    exit_fd.async_wait(asio::posix::stream_descriptor::wait_read, [w = weak_from_this()](std::error_code ec) {
      auto self = w.lock();
      if (ec || !self) return;
      int status = 0;
      if (::waitpid(self->srun_pid, &status, WNOHANG) != self->srun_pid) return;
      self->drain_stderr();
      self->end(exit_code_of_srun(status));
    });
  }

  void read_stderr() {
    stderr_pipe.async_read_some(asio::buffer(buf), [w = weak_from_this()](std::error_code ec, std::size_t n) {
      auto self = w.lock();
      if (!self || ec) return;
      self->pass_on({self->buf, n});
      self->read_stderr();
    });
  }

  void drain_stderr() {
    std::error_code ec;
    stderr_pipe.non_blocking(true, ec);
    for (;;) {
      auto n = ::read(stderr_pipe.native_handle(), buf, sizeof buf);
      if (n <= 0) break;
      pass_on({buf, static_cast<std::size_t>(n)});
    }
  }

  void pass_on(std::string_view bytes) {
    // Once fiber ended the step, what srun says about it (task killed, step aborted) is no news.
    if (!killing)
      for (std::size_t done = 0; done < bytes.size();) {
      auto n = ::write(2, bytes.data() + done, bytes.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    stderr_tail.append(bytes);
    if (stderr_tail.size() > 2048) stderr_tail.erase(0, stderr_tail.size() - 2048);
  }

  void end(int exit_code) {
    if (ended) return;
    ended = true;
    code = exit_code;
    load->cpus[node] -= cpus;
    std::error_code ignored;
    stderr_pipe.close(ignored);
    exit_fd.close(ignored);
    // slurmstepd killed it for its memory limit: srun passed on what it said.
    if (auto memory = killing ? std::nullopt : memory_stop_in(stderr_tail)) stopped_for_memory(*memory);
    report_end(code);
  }

  void signal(int sig) noexcept override {
    if (ended) return;
    if (sig == SIGTERM) return signal_step(sig);
    // srun passes most signals on to its task; a TERM, INT or KILL makes it cancel the step (the
    // task is killed). srun itself is never sent SIGKILL: the step would run on without it.
    bool ends = sig == SIGKILL || sig == SIGINT;
    killing |= ends;
    ::kill(srun_pid, ends ? SIGTERM : sig);
  }

  /// Sends `sig` to the task itself (srun would cancel the step on a TERM): scancel of the step,
  /// found by its name; srun cancels it when the step cannot be found.
  void signal_step(int sig) {
    const char* job = std::getenv("SLURM_JOB_ID");
    commands->run({"squeue", "-s", "-h", "-j", job ? job : "", "-o", "%i|%j"}, {},
                  [w = weak_from_this(), sig](command_result r) {
                    auto self = w.lock();
                    if (!self || self->ended) return;
                    std::string step;
                    for (std::size_t pos = 0; pos < r.out.size();) {
                      auto eol = r.out.find('\n', pos);
                      std::string_view line(r.out.data() + pos, (eol == std::string::npos ? r.out.size() : eol) - pos);
                      pos = eol == std::string::npos ? r.out.size() : eol + 1;
                      auto bar = line.find('|');
                      if (bar != std::string_view::npos && line.substr(bar + 1) == self->step_name)
                        step = std::string(line.substr(0, bar));
                    }
                    if (step.empty()) {
                      self->killing = true;
                      ::kill(self->srun_pid, SIGTERM);
                      return;
                    }
                    self->commands->run({"scancel", "--signal=" + std::to_string(sig), step}, {},
                                        [](const command_result& done) {
                                          if (!done.ok()) logf(log_level::debug, "scancel: ", done.problem());
                                        });
                  });
  }

  void kill_and_reap() noexcept override {
    if (ended) return;
    forget_waiters();  // the caller reports the kill itself
    killing = true;
    ::kill(srun_pid, SIGTERM);
    pollfd p{exit_fd.native_handle(), POLLIN, 0};
    // srun ends once Slurm took the step down; one that cannot reach the controller is killed.
    if (::poll(&p, 1, 10000) <= 0) ::kill(srun_pid, SIGKILL);
    int status = 0;
    while (::waitpid(srun_pid, &status, 0) < 0 && errno == EINTR) {
    }
    drain_stderr();
    end(-SIGKILL);
  }

  std::string exit_detail() const override {
    if (code == 0 || stderr_tail.empty()) return {};
    auto tail = stderr_tail;
    while (!tail.empty() && tail.back() == '\n') tail.pop_back();
    auto& memory = memory_stopped();
    return (memory ? memory_stop_text(*memory) + "; " : std::string()) + "its last output (srun on node " + node + "): " + tail;
  }
};

}  // namespace

step_jobs::step_jobs(asio::io_context& io, const fiber::config& cfg, std::vector<std::string> nodes)
    : io_(io), cfg_(cfg), commands_(std::make_shared<command_thread>(io)), nodes_(std::move(nodes)) {}

std::unique_ptr<job> step_jobs::start(const spawn_spec& spec) {
  std::string node = spec.host;  // a host hub: its node
  int fewest = 0;
  for (auto& n : spec.host.empty() ? nodes_ : std::vector<std::string>{}) {
    int used = load_->cpus[n];
    if (node.empty() || used < fewest) {
      node = n;
      fewest = used;
    }
  }
  auto env = environment_with(spec.env);
  auto c = spawn_command(srun_args(spec, cfg_, node), {.pipe_stderr = true, .env = &env});
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, c.pid, 0));
  if (pidfd < 0) {
    int err = errno;
    ::kill(c.pid, SIGTERM);
    ::waitpid(c.pid, nullptr, 0);
    ::close(c.stderr_fd);
    throw error(errc::spawn_failed, pidfd_open_failure(err));
  }
  logf(log_level::debug, "starting ", spec.name, " as a Slurm step on ", node, " (srun pid ", c.pid, ")");
  auto run = std::make_shared<step_run>(io_, c, pidfd, load_, node, std::max(spec.cpu, 1), commands_,
                                        job_name(spec.job_id, spec.name));
  run->begin();
  return std::make_unique<job>(std::move(run));
}

}  // namespace fiber::detail::slurm
