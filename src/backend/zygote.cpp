#include "backend/zygote.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/log.hpp"
#include "core/worker_env.hpp"

extern char** environ;

namespace fiber::detail {

namespace {
constexpr std::size_t max_request = std::size_t{64} * 1024;

bool single_threaded() {
  DIR* d = opendir("/proc/self/task");
  if (!d) return false;
  int n = 0;
  while (auto* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n == 1;
}
}  // namespace

std::unique_ptr<zygote> zygote::start(const std::string& executable) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    logf(log_level::warn, "fork server unavailable (socketpair: ", std::strerror(errno), "); children will be exec'd");
    return nullptr;
  }
  // The helper gets its end as fd 3 and nothing else of the master's: a descriptor the master
  // opened without CLOEXEC (a listener, say) must not stay open for as long as the helper lives.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const int helper_fd = 3;
  int from = sv[1];
  if (from <= helper_fd) from = ::fcntl(sv[1], F_DUPFD_CLOEXEC, helper_fd + 1);  // dup2 onto itself keeps CLOEXEC
  posix_spawn_file_actions_adddup2(&actions, from, helper_fd);
  posix_spawn_file_actions_addclosefrom_np(&actions, helper_fd + 1);
  std::vector<std::string> env_storage;
  // A master that is itself a child (nested) has its own parent's pid in its environment: the
  // helper must see this process's (getenv takes the first of two), or it leaves at once.
  auto replaced = [](std::string_view entry) {
    for (std::string_view name : {std::string_view(env_zygote_fd), std::string_view(env_parent_pid)})
      if (entry.starts_with(name) && entry.size() > name.size() && entry[name.size()] == '=') return true;
    return false;
  };
  for (char** e = environ; e && *e; ++e)
    if (!replaced(*e)) env_storage.emplace_back(*e);
  env_storage.push_back(std::string(env_zygote_fd) + "=" + std::to_string(helper_fd));
  env_storage.push_back(std::string(env_parent_pid) + "=" + std::to_string(getpid()));
  std::vector<char*> envp;
  envp.reserve(env_storage.size() + 1);
  for (auto& s : env_storage) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = executable, flag = zygote_flag;
  char* argv[] = {exe.data(), flag.data(), nullptr};
  pid_t pid = 0;
  int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (from != sv[1]) close(from);
  close(sv[1]);
  if (rc != 0) {
    close(sv[0]);
    logf(log_level::warn, "fork server unavailable (", std::strerror(rc), "); children will be exec'd");
    return nullptr;
  }
  return std::unique_ptr<zygote>(new zygote(sv[0], pid));
}

zygote::~zygote() {
  close(fd_);  // the helper sees end-of-file and leaves
  kill(pid_, SIGKILL);
  while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

pid_t zygote::fork_worker(const std::vector<std::string>& env) const {
  std::string request;
  for (auto& kv : env) {
    request += kv;
    request.push_back('\0');
  }
  if (request.size() > max_request) return -E2BIG;
  if (send(fd_, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) return -errno;
  std::int32_t reply = 0;
  ssize_t n;
  while ((n = recv(fd_, &reply, sizeof reply, 0)) < 0 && errno == EINTR) {
  }
  if (n != sizeof reply) return -EPIPE;  // the helper died
  return reply;
}

void run_zygote(int fd, void (*run_child)()) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::prctl(PR_SET_NAME, fork_server_name);  // how ps and tests tell it from its children
  const char* parent = std::getenv(env_parent_pid);
  if (!parent || std::to_string(getppid()) != parent) std::_Exit(70);
  unsetenv(env_zygote_fd);
  std::vector<char> buf(max_request);
  for (;;) {
    ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) std::_Exit(0);  // the master has gone or closed us
    std::int32_t reply;
    if (!single_threaded()) {
      reply = -EDEADLK;  // forking a threaded process is unsafe: the master falls back to exec
    } else {
      // A fork whose parent is the master (CLONE_PARENT): safe here, with one thread and no
      // ZeroMQ context or event loop in this process.
      long pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
      if (pid == 0) {
        close(fd);
        ::prctl(PR_SET_NAME, "fiber-worker");
        // The child's environment is the one the master asked for, as with exec.
        clearenv();
        for (char* p = buf.data(); p < buf.data() + n; p += std::strlen(p) + 1) putenv(strdup(p));
        run_child();
        std::_Exit(70);
      }
      reply = pid < 0 ? -errno : static_cast<std::int32_t>(pid);
    }
    while (send(fd, &reply, sizeof reply, MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
  }
}

}  // namespace fiber::detail
