// Local backend: children forked by the fork server (or posix_spawn'd), each watched through a
// pidfd on the io_context, given the GPUs and CPUs it asks for (local_resources).
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <sched.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/engine_run.hpp"
#include "backend/local/local_resources.hpp"
#include "backend/local/memory_cgroups.hpp"
#include "backend/local/memory_watch.hpp"
#include "backend/command.hpp"
#include "backend/secret_store.hpp"
#include "backend/spawner.hpp"
#include "backend/zygote.hpp"
#include "backend/local/adopted_process.hpp"
#include "fiber/config.hpp"
#include "core/build_id.hpp"
#include "fiber/error.hpp"
#include "core/log.hpp"
#include "core/worker_env.hpp"

extern char** environ;

namespace fiber::detail {
namespace {

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return -1;
}

/// A local child: queued while the GPUs it asks for are all taken, then a process watched through
/// its pidfd (identified and running from its fork). Its grant goes back when it is reaped, and
/// the next waiting child starts.
class local_run final : public engine_run, public std::enable_shared_from_this<local_run> {
 public:
  local_run(asio::io_context& io, std::shared_ptr<local_resources> resources)
      : engine_run({.queued = true, .identified_later = true}), io_(io), resources_(std::move(resources)) {}
  ~local_run() override { kill_and_reap(); }

  /// The process runs: watch it, and tell whoever waited for that.
  void started(pid_t p, int pidfd, local_grant grant) {
    ticket_ = 0;
    pid = p;
    grant_ = std::move(grant);
    fd_.emplace(io_, pidfd);
    mark_identified();
    mark_running();
    wait_for_exit();
  }
  /// It could not be started: it ends without having run.
  void failed(std::string why) {
    ticket_ = 0;
    end_without_running(127, std::move(why));
  }
  void set_ticket(std::uint64_t t) noexcept { ticket_ = t; }
  /// Once it runs: stopped (SIGKILL) when its memory cgroup reaches `limit_mb` MiB (`cgroups`,
  /// where there are any and the group could be made), else the first time `watch` sees its
  /// resident memory above it; its end then says so.
  void limit_memory(const std::shared_ptr<memory_cgroups>& cgroups, std::shared_ptr<memory_watch> watch,
                    std::uint64_t limit_mb) {
    auto over = [weak = weak_from_this(), limit_mb](const memory_use& seen) {
      if (auto self = weak.lock()) self->over_memory(limit_mb, seen);
    };
    if (cgroups) group_ = cgroups->limit(pid, limit_mb, over);
    if (group_) {
      cgroups_ = cgroups;
      return;
    }
    watch_ = std::move(watch);
    watch_id_ = watch_->watch(pid, limit_mb, std::move(over));
  }

  std::string placement() const override {
    std::string out;
    auto list = [&](const char* what, auto& items, auto text) {
      if (items.empty()) return;
      out += (out.empty() ? "" : " ") + std::string(what);
      for (std::size_t i = 0; i < items.size(); ++i) out += (i ? "," : " ") + text(items[i]);
    };
    list("cpus", grant_.cpus, [](int c) { return std::to_string(c); });
    list("GPUs", grant_.gpus, [](const std::string& g) { return g; });
    return out;
  }
  /// Its pid is this host's already: what the child says of itself changes nothing.
  void reported_pid(int) override {}

  bool is_stopped() const noexcept override {
    if (reaped_ || !fd_) return false;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/stat", pid.load());
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
    if (reaped_) return;
    if (!fd_) {  // still waiting for its GPUs: it ends as if the signal had killed it
      if (sig == SIGTERM || sig == SIGKILL || sig == SIGINT) end_without_running(-sig, "it was still waiting for a free GPU");
      return;
    }
    ::syscall(SYS_pidfd_send_signal, fd_->native_handle(), sig, nullptr, 0);
  }

  void kill_and_reap() noexcept override {
    if (reaped_) return;
    reaped_ = true;
    forget_waiters();  // the caller reports the end itself
    if (!fd_) {
      if (ticket_) resources_->cancel(std::exchange(ticket_, 0));
      report_end(-SIGKILL);
      return;
    }
    ::syscall(SYS_pidfd_send_signal, fd_->native_handle(), SIGKILL, nullptr, 0);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::error_code ignored;
    fd_->cancel(ignored);
    release();
    report_end(decode_status(status));
  }

 private:
  void over_memory(std::uint64_t limit_mb, const memory_use& seen) {
    watch_id_ = 0;  // a watch tells once, and forgets it
    if (reaped_ || !fd_) return;
    stopped_for_memory({limit_mb, (std::max(seen.peak, seen.resident) + (1 << 20) - 1) >> 20});
    logf(log_level::info, "pid ", pid.load(), ": resident memory ", seen.resident >> 20, " MiB, past its limit of ", limit_mb,
         " MiB; stopping it");
    ::syscall(SYS_pidfd_send_signal, fd_->native_handle(), SIGKILL, nullptr, 0);
  }

  /// From the loop, not inside whoever ended it.
  void end_without_running(int code, std::string why) {
    if (ticket_) resources_->cancel(std::exchange(ticket_, 0));
    reaped_ = true;
    asio::post(io_, [self = shared_from_this(), code, why = std::move(why)]() mutable { self->report_end(code, std::move(why)); });
  }

  void release() {
    if (released_) return;
    released_ = true;
    if (watch_id_) watch_->unwatch(std::exchange(watch_id_, 0));
    if (group_) cgroups_->release(std::exchange(group_, 0));  // reaped: its group is empty
    resources_->give_back(grant_);
    // Children waiting for these GPUs start from the loop, not inside whoever reaped this one.
    asio::post(io_, [resources = resources_] { resources->start_waiting(); });
  }

  void wait_for_exit() {
    fd_.value().async_wait(asio::posix::stream_descriptor::wait_read, [self = shared_from_this()](std::error_code ec) {
      if (ec || self->reaped_) return;  // cancelled: it was killed and reaped
      // The pidfd may turn readable a moment before the child can be reaped (seen on Linux 6.18
      // with a fork-server child: waitpid said "not yet"): wait again rather than never.
      int status = 0;
      if (!self->try_reap(status)) return self->wait_for_exit();
      self->release();
      auto& memory = self->memory_stopped();
      self->report_end(decode_status(status), memory ? memory_stop_text(*memory) : std::string());
    });
  }

  bool try_reap(int& status) {
    pid_t r;
    while ((r = ::waitpid(pid, &status, WNOHANG)) < 0 && errno == EINTR) {
    }
    if (r != pid) return false;
    reaped_ = true;
    return true;
  }

  asio::io_context& io_;
  std::shared_ptr<local_resources> resources_;
  std::optional<asio::posix::stream_descriptor> fd_;  // set once the process runs
  local_grant grant_;
  std::uint64_t ticket_ = 0;  // waiting for GPUs
  std::shared_ptr<memory_watch> watch_;
  std::uint64_t watch_id_ = 0;  // while its memory is watched
  std::shared_ptr<memory_cgroups> cgroups_;
  std::uint64_t group_ = 0;  // while it is in a memory cgroup of its own
  bool reaped_ = false;
  bool released_ = false;
};

class local_backend final : public backend {
 public:
  local_backend(asio::io_context& io, const fiber::config& cfg)
      : io_(io),
        forkserver_(cfg.start_method == "forkserver"),
        resources_(std::make_shared<local_resources>([gpus = cfg.gpus] { return gpus_to_hand_out(gpus); }, allowed_cpus())),
        memory_(std::make_shared<memory_watch>(io, std::chrono::milliseconds(cfg.memory_poll_ms))),
        cgroups_allowed_(cfg.local_memory_limit == "auto"),
        secrets_(secret_store::in_memory()) {}
  ~local_backend() override { resources_->clear_waiting(); }  // nothing starts once the backend is gone

  std::string name() const override { return "local"; }
  std::string listen_endpoint(const std::string& job_id) const override {
    // Abstract unix socket: nothing on disk to clean up.
    return "ipc://@fiber-" + job_id + "-" + std::to_string(::getpid());
  }

  void check_capacity(const spawn_spec& spec) const override { resources_->check(spec); }

  std::unique_ptr<job> adopt(const std::string& handle) override {
    int pid = 0;
    auto [end, ec] = std::from_chars(handle.data(), handle.data() + handle.size(), pid);
    if (ec != std::errc() || end != handle.data() + handle.size() || pid <= 0)
      throw error(errc::spawn_failed, "a local worker to take up is named by its pid, not '" + handle + "'");
    return adopt_local_process(io_, pid);
  }

  std::unique_ptr<job> spawn(const spawn_spec& spec) override {
    auto run = std::make_shared<local_run>(io_, resources_);
    if (auto grant = resources_->try_take(spec)) {
      start(spec, *run, std::move(*grant));  // throws: nothing was started
      return std::make_unique<job>(std::move(run));
    }
    logf(log_level::info, spec.name, " waits for ", spec.gpu, " free GPU", spec.gpu == 1 ? "" : "s", " of ",
         resources_->gpus().ids.size());
    run->set_ticket(resources_->wait([this, spec, weak = std::weak_ptr<local_run>(run)] {
      auto waiting = weak.lock();
      if (!waiting) return true;  // its job went meanwhile (the ticket went with it)
      auto grant = resources_->try_take(spec);
      if (!grant) return false;
      try {
        start(spec, *waiting, std::move(*grant));
      } catch (const std::exception& e) {
        waiting->failed(e.what());
      }
      return true;
    }));
    return std::make_unique<job>(std::move(run));
  }

 private:
  void start(const spawn_spec& spec, local_run& j, local_grant grant) {
    auto added = spec.env;
    if (!spec.secret.empty()) added.emplace_back(env_keys_file, secrets_.path_for(spec.secret));
    added.emplace_back("FIBER_WORKER_PARENT_PID", std::to_string(::getpid()));
    std::string devices, cpus;
    for (auto& g : grant.gpus) devices += (devices.empty() ? "" : ",") + g;
    for (int c : grant.cpus) cpus += (cpus.empty() ? "" : ",") + std::to_string(c);
    // A child sees only its own devices; one that asked for none sees none.
    added.emplace_back("CUDA_VISIBLE_DEVICES", devices);
    added.emplace_back("NVIDIA_VISIBLE_DEVICES", devices.empty() ? "void" : devices);
    if (!cpus.empty()) added.emplace_back(env_cpus, cpus);
    auto env_storage = environment_with(added);
    pid_t pid = 0;
    try {
      run_on_spawner_thread([&] {
        pid = fork_from_zygote(spec, env_storage);
        if (pid <= 0) pid = exec_child(spec, env_storage);
      });
    } catch (...) {
      resources_->give_back(grant);
      throw;
    }
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) {
      int err = errno;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      resources_->give_back(grant);
      throw error(errc::spawn_failed, pidfd_open_failure(err));
    }
    logf(log_level::debug, "started ", spec.name, " as pid ", pid);
    j.started(pid, pidfd, std::move(grant));
    if (spec.memory_mb > 0) j.limit_memory(cgroups(), memory_, static_cast<std::uint64_t>(spec.memory_mb));
  }

  /// The memory cgroups children's limits are made of, made at the first limit; null where this
  /// host does not let fiber make them, or local_memory_limit=watch.
  std::shared_ptr<memory_cgroups> cgroups() {
    if (cgroups_tried_) return cgroups_;
    cgroups_tried_ = true;
    if (!cgroups_allowed_) return nullptr;
    std::string why_not;
    cgroups_ = memory_cgroups::make(io_, why_not);
    if (!cgroups_) logf(log_level::info, "memory limits are watched every memory_poll_ms: ", why_not);
    return cgroups_;
  }

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
    envp.reserve(env_storage.size() + 1);
    for (auto& s : env_storage) envp.push_back(s.data());
    envp.push_back(nullptr);

    std::vector<std::string> arg_storage{spec.executable};
    arg_storage.insert(arg_storage.end(), spec.args.begin(), spec.args.end());
    std::vector<char*> argv;
    argv.reserve(arg_storage.size() + 1);
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
  std::shared_ptr<local_resources> resources_;
  std::shared_ptr<memory_watch> memory_;  // resident-memory limits of the children that have one
  bool cgroups_allowed_;                  // local_memory_limit=auto
  bool cgroups_tried_ = false;
  std::shared_ptr<memory_cgroups> cgroups_;  // where the host lets fiber make them
  secret_store secrets_;
};

}  // namespace

std::unique_ptr<backend> make_local_backend(asio::io_context& io, const fiber::config& cfg) {
  return std::make_unique<local_backend>(io, cfg);
}

}  // namespace fiber::detail
