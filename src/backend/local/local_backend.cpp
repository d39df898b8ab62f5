// Local backend: posix_spawn of the executable, exit detected through a pidfd on the io_context.
#include <asio/io_context.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "backend/backend.hpp"
#include "backend/command.hpp"
#include "backend/spawner.hpp"
#include "backend/zygote.hpp"
#include "fiber/config.hpp"
#include "core/build_id.hpp"
#include "fiber/error.hpp"
#include "core/log.hpp"

extern char** environ;

namespace fiber::detail {
namespace {

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1;
}

class local_job final : public job {
 public:
  local_job(asio::io_context& io, pid_t pid, int pidfd) : pid_(pid), fd_(io, pidfd) {}
  ~local_job() override { kill_and_reap(); }

  int pid() const noexcept override { return pid_; }

  void on_exit(unique_function<void(int)> cb) override {
    if (reaped_) {
      cb(code_);
      return;
    }
    callback_ = std::move(cb);
    wait_for_exit();
  }

  bool is_stopped() const noexcept override {
    if (reaped_) return false;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid_));
    std::FILE* f = std::fopen(path, "r");
    if (!f) return false;
    char buf[512];
    auto n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = 0;
    const char* close = std::strrchr(buf, ')');  // the name may hold spaces and parentheses
    return close && close[1] == ' ' && (close[2] == 'T' || close[2] == 't');
  }

  void signal(int sig) noexcept override {
    if (!reaped_) ::syscall(SYS_pidfd_send_signal, fd_.native_handle(), sig, nullptr, 0);
  }

  void kill_and_reap() noexcept override {
    if (reaped_) return;
    signal(SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    code_ = decode_status(status);
    std::error_code ignored;
    fd_.cancel(ignored);
  }

 private:
  void wait_for_exit() {
    fd_.async_wait(asio::posix::stream_descriptor::wait_read, [this](std::error_code ec) {
      if (ec) return;  // cancelled: the job is going away
      // The pidfd may turn readable a moment before the child can be reaped (seen on Linux 6.18
      // with a fork-server child: waitpid said "not yet"): wait again rather than never.
      if (!try_reap()) return wait_for_exit();
      if (auto cb = std::move(callback_)) {
        callback_ = nullptr;
        cb(code_);
      }
    });
  }

  bool try_reap() {
    int status = 0;
    pid_t r;
    while ((r = ::waitpid(pid_, &status, WNOHANG)) < 0 && errno == EINTR) {
    }
    if (r != pid_) return false;
    reaped_ = true;
    code_ = decode_status(status);
    return true;
  }

  pid_t pid_;
  asio::posix::stream_descriptor fd_;
  unique_function<void(int)> callback_;
  bool reaped_ = false;
  int code_ = 0;
};

class local_backend final : public backend {
 public:
  local_backend(asio::io_context& io, const fiber::config& cfg)
      : io_(io), forkserver_(cfg.start_method == "forkserver") {}
  std::string name() const override { return "local"; }
  std::string listen_endpoint(const std::string& job_id) const override {
    // Abstract unix socket: nothing on disk to clean up.
    return "ipc://@fiber-" + job_id + "-" + std::to_string(::getpid());
  }

  std::unique_ptr<job> spawn(const spawn_spec& spec) override {
    auto added = spec.env;
    added.emplace_back("FIBER_WORKER_PARENT_PID", std::to_string(::getpid()));
    if (spec.gpu > 0) {
      // Children see only their share of devices; a real scheduler of devices comes with `meta`.
      std::string devices;
      for (int i = 0; i < spec.gpu; ++i) devices += (i ? "," : "") + std::to_string(i);
      added.emplace_back("CUDA_VISIBLE_DEVICES", devices);
    }
    auto env_storage = environment_with(added);
    pid_t pid = 0;
    run_on_spawner_thread([&] {
      pid = fork_from_zygote(spec, env_storage);
      if (pid <= 0) pid = exec_child(spec, env_storage);
    });
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) {
      int err = errno;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      throw error(errc::spawn_failed, std::string("pidfd_open failed: ") + std::strerror(err) +
                                          " (the local backend needs Linux 5.3 or newer)");
    }
    logf(log_level::debug, "started ", spec.name, " as pid ", pid);
    return std::make_unique<local_job>(io_, pid, pidfd);
  }

 private:
  /// 0 when this child cannot come from the fork server (another executable, start_method=spawn,
  /// or the helper is not usable); the caller then execs it.
  pid_t fork_from_zygote(const spawn_spec& spec, const std::vector<std::string>& env) {
    if (!forkserver_ || spec.executable != executable_path()) return 0;
    if (!zygote_) {
      zygote_ = zygote::start(spec.executable);
      if (!zygote_) {
        forkserver_ = false;
        return 0;
      }
    }
    pid_t pid = zygote_->fork_worker(env);
    if (pid > 0) return pid;
    logf(log_level::warn, "fork server could not start ", spec.name, " (", std::strerror(-pid),
         "); exec'ing children from now on");
    zygote_.reset();
    forkserver_ = false;
    return 0;
  }

  pid_t exec_child(const spawn_spec& spec, std::vector<std::string>& env_storage) {
    std::vector<char*> envp;
    for (auto& s : env_storage) envp.push_back(s.data());
    envp.push_back(nullptr);

    std::vector<std::string> arg_storage{spec.executable};
    arg_storage.insert(arg_storage.end(), spec.args.begin(), spec.args.end());
    std::vector<char*> argv;
    for (auto& s : arg_storage) argv.push_back(s.data());
    argv.push_back(nullptr);

    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, all_default;
    sigemptyset(&none);
    sigemptyset(&all_default);
    sigaddset(&all_default, SIGTERM);
    sigaddset(&all_default, SIGINT);
    sigaddset(&all_default, SIGPIPE);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all_default);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    // Only stdin, stdout and stderr pass to the child: a descriptor the master opened without
    // CLOEXEC (a listener, say) must not stay open for as long as a child lives.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    pid_t pid = 0;
    int rc = ::posix_spawn(&pid, spec.executable.c_str(), &actions, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0)
      throw error(errc::spawn_failed, "cannot start '" + spec.executable + "' for " + spec.name + ": " +
                                          std::strerror(rc) + " (check the config key 'executable')");
    return pid;
  }

  asio::io_context& io_;
  bool forkserver_;
  std::unique_ptr<zygote> zygote_;
};

}  // namespace

std::unique_ptr<backend> make_local_backend(asio::io_context& io, const fiber::config& cfg) {
  return std::make_unique<local_backend>(io, cfg);
}

}  // namespace fiber::detail
