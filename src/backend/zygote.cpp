#include "backend/zygote.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/warm_spare.hpp"
#include "core/log.hpp"
#include "core/worker_env.hpp"

extern char** environ;

namespace fiber::detail {

namespace {
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
  // The helper binds every symbol as it is loaded (1 ms, once), so that no child it forks
  // resolves its first calls one by one (0.2 ms a child): a child's environment is the master's
  // choice, not this one.
  env_storage.push_back("LD_BIND_NOW=1");
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

namespace {
// The helper's answers: the child asked for, or the spare forked after it.
enum class answer_kind : std::int32_t { child = 1, spare = 2 };
struct answer {
  answer_kind kind;
  std::int32_t value;  // a pid, or -errno
};
}  // namespace

zygote::~zygote() {
  // End-of-file tells the helper to leave; first it finishes and announces a spare it was forking,
  // so that every spare is known here and reaped. A helper that does not leave (stopped) is killed.
  ::shutdown(fd_, SHUT_WR);
  for (pid_t ignored; read_answer(ignored, 5000);) {
  }
  close(fd_);
  kill(pid_, SIGKILL);
  while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  reap_spare();  // it read end-of-file when the helper ended, and leaves by itself; kill it anyway
}

bool zygote::read_answer(pid_t& child, int timeout_ms) {
  pollfd p{fd_, POLLIN, 0};
  int ready;
  while ((ready = ::poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {
  }
  if (ready <= 0) return false;
  answer a{};
  ssize_t n;
  while ((n = recv(fd_, &a, sizeof a, 0)) < 0 && errno == EINTR) {
  }
  if (n != sizeof a) return false;
  if (a.kind == answer_kind::spare) {
    reap_spare();  // a spare not used before a new one was forked had died
    spare_ = a.value > 0 ? a.value : 0;
    ++spares_announced_;
    return true;
  }
  if (a.value == spare_) spare_ = 0;  // it is the child now, watched as every child
  child = a.value;
  return true;
}

void zygote::reap_spare() noexcept {
  if (spare_ <= 0) return;
  kill(spare_, SIGKILL);
  while (waitpid(spare_, nullptr, 0) < 0 && errno == EINTR) {
  }
  spare_ = 0;
}

pid_t zygote::fork_worker(const std::vector<std::string>& env) {
  std::string request;
  for (auto& kv : env) {
    request += kv;
    request.push_back('\0');
  }
  if (request.size() > max_environment) return -E2BIG;
  if (send(fd_, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) return -errno;
  // The spare announced after the last child may come first.
  for (int spares = 0; spares < 2; ++spares) {
    pid_t child = 0;
    if (!read_answer(child, -1)) return -EPIPE;  // the helper died
    if (child != 0) return child;
  }
  return -EPROTO;
}

pid_t zygote::await_spare() {
  for (int seen = spares_announced_; spares_announced_ == seen;) {
    pid_t child = 0;
    if (!read_answer(child, -1)) return 0;
  }
  return spare_;
}

namespace {
// This process's open descriptors but the one that lists them.
std::vector<int> open_descriptors() {
  std::vector<int> fds;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (auto* e = readdir(d))
      if (e->d_name[0] != '.' && std::atoi(e->d_name) != dirfd(d)) fds.push_back(std::atoi(e->d_name));
    closedir(d);
  }
  return fds;
}

// What the fork server's own ZeroMQ context opened (its mailbox): a child closes it first.
std::vector<int> context_descriptors;

// Every child makes a ZeroMQ context, and the first context in a process starts OpenPGM (a
// protocol looked up by name: nsswitch.conf read, the library path searched for its modules) and
// libsodium (its random source, the CPU's features): 0.15 ms of each child's start. Both count
// their users, so with a context made here and kept, a child's own context finds them started.
// A context starts no thread until a socket is made, and none is: this process stays
// single-threaded, and no child touches this context.
void start_zeromq_once() {
  auto before = open_descriptors();
  static void* kept = zmq_ctx_new();
  if (!kept) return;  // each child then starts them itself, as without this
  for (int fd : open_descriptors())
    if (std::find(before.begin(), before.end(), fd) == before.end()) context_descriptors.push_back(fd);
}

// The child's environment is the one the master asked for, as with exec.
void (*child_main)() = nullptr;
[[noreturn]] void become_worker(char* env, std::size_t size) {
  ::prctl(PR_SET_NAME, "fiber-worker");
  for (int fd : context_descriptors) ::close(fd);
  clearenv();
  for (char* p = env; p < env + size; p += std::strlen(p) + 1) putenv(strdup(p));
  child_main();
  std::_Exit(70);
}

bool send_answer(int fd, answer_kind kind, std::int32_t value) {
  answer a{kind, value};
  ssize_t n;
  while ((n = send(fd, &a, sizeof a, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  return n == sizeof a;
}

// A child forked now, for the request in `env`: its pid, or -errno.
std::int32_t fork_now(int fd, char* env, std::size_t size) {
  // A fork whose parent is the master (CLONE_PARENT): safe here, with one thread, no event loop,
  // and a ZeroMQ context that has no socket (and so no thread) and that no child uses.
  long pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
  if (pid == 0) {
    close(fd);
    become_worker(env, size);
  }
  return pid < 0 ? -errno : static_cast<std::int32_t>(pid);
}
}  // namespace

void run_zygote(int fd, void (*run_child)()) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::prctl(PR_SET_NAME, fork_server_name);  // how ps and tests tell it from its children
  const char* parent = std::getenv(env_parent_pid);
  const pid_t master = getppid();
  if (!parent || std::to_string(master) != parent) std::_Exit(70);
  unsetenv(env_zygote_fd);
  start_zeromq_once();
  child_main = run_child;
  std::vector<char> buf(max_environment);
  warm_spare spare;
  for (;;) {
    ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) std::_Exit(0);  // the master has gone or closed us; a spare reads end-of-file too
    const auto size = static_cast<std::size_t>(n);
    std::int32_t child;
    if (!single_threaded()) {
      child = -EDEADLK;  // forking a threaded process is unsafe: the master falls back to exec
    } else {
      child = spare.ready() ? spare.hand_over(buf.data(), size) : 0;
      if (child == 0) child = fork_now(fd, buf.data(), size);
    }
    if (!send_answer(fd, answer_kind::child, child)) std::_Exit(0);
    // The next child's fork, after the answer: off the path of the one just asked for. Announced
    // either way (0: none), so that a master waiting for it (await_spare) is never left waiting.
    if (child > 0) {
      bool forked = spare.fork(fd, master, &become_worker);
      if (!send_answer(fd, answer_kind::spare, forked ? spare.pid() : 0)) std::_Exit(0);
    }
  }
}

}  // namespace fiber::detail
