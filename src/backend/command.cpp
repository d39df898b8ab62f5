#include "backend/command.hpp"

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "fiber/error.hpp"

extern char** environ;

namespace fiber::detail {

std::vector<std::string> environment_with(const std::vector<std::pair<std::string, std::string>>& added) {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    bool replaced = false;
    for (auto& [k, v] : added)
      if (kv.size() > k.size() && kv.compare(0, k.size(), k) == 0 && kv[k.size()] == '=') replaced = true;
    if (!replaced) out.emplace_back(kv);
  }
  for (auto& [k, v] : added) out.push_back(k + "=" + v);
  return out;
}

namespace {

struct pipe_pair {
  int read = -1, write = -1;
  void open() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw error(errc::spawn_failed, std::string("pipe: ") + std::strerror(errno));
    read = fds[0];
    write = fds[1];
  }
  void close_both() {
    if (read >= 0) ::close(read);
    if (write >= 0) ::close(write);
    read = write = -1;
  }
};

}  // namespace

spawned_command spawn_command(const std::vector<std::string>& argv, const command_io& io) {
  pipe_pair in, out, err;
  try {
    if (io.pipe_stdin) in.open();
    if (io.pipe_stdout) out.open();
    if (io.pipe_stderr) err.open();
  } catch (...) {
    in.close_both();
    out.close_both();
    throw;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (io.pipe_stdin)
    posix_spawn_file_actions_adddup2(&actions, in.read, 0);
  else
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (io.pipe_stdout) posix_spawn_file_actions_adddup2(&actions, out.write, 1);
  if (io.pipe_stderr) posix_spawn_file_actions_adddup2(&actions, err.write, 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGTERM, SIGINT, SIGPIPE, SIGCHLD}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> args = argv;
  std::vector<char*> c_args;
  c_args.reserve(args.size());
  for (auto& a : args) c_args.push_back(a.data());
  c_args.push_back(nullptr);
  std::vector<std::string> env_copy;
  std::vector<char*> c_env;
  if (io.env) {
    env_copy = *io.env;
    for (auto& e : env_copy) c_env.push_back(e.data());
    c_env.push_back(nullptr);
  }
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0].c_str(), &actions, &attr, c_args.data(), io.env ? c_env.data() : environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  // The child's ends belong to the child now.
  for (int fd : {in.read, out.write, err.write})
    if (fd >= 0) ::close(fd);
  if (rc != 0) {
    for (int fd : {in.write, out.read, err.read})
      if (fd >= 0) ::close(fd);
    throw error(errc::spawn_failed, "cannot run '" + argv[0] + "': " + std::strerror(rc) +
                                        (rc == ENOENT ? " (is it installed and on PATH?)" : ""));
  }
  return {pid, in.write, out.read, err.read};
}

std::string command_result::problem() const {
  if (!failure.empty()) return failure;
  auto text = err;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (!text.empty()) return text;
  return code < 0 ? "killed by signal " + std::to_string(-code) : "exit code " + std::to_string(code);
}

command_result run_command(const std::vector<std::string>& argv, const std::string& input,
                           std::chrono::milliseconds timeout, const std::vector<std::string>* env) {
  command_result r;
  spawned_command c;
  try {
    c = spawn_command(argv, {.pipe_stdin = true, .pipe_stdout = true, .pipe_stderr = true, .env = env});
  } catch (const std::exception& e) {
    r.failure = e.what();
    return r;
  }
  // A program that closes its stdin early must not end this process with SIGPIPE.
  sigset_t pipe_only, before;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &before);
  ::fcntl(c.stdin_fd, F_SETFL, ::fcntl(c.stdin_fd, F_GETFL) | O_NONBLOCK);
  std::size_t written = 0;
  if (input.empty()) {
    ::close(c.stdin_fd);
    c.stdin_fd = -1;
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  char buf[65536];
  while (c.stdout_fd >= 0 || c.stderr_fd >= 0) {
    pollfd fds[3];
    int n = 0;
    for (int fd : {c.stdout_fd, c.stderr_fd})
      if (fd >= 0) fds[n++] = {fd, POLLIN, 0};
    if (c.stdin_fd >= 0) fds[n++] = {c.stdin_fd, POLLOUT, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    int ready = ::poll(fds, n, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    for (int i = 0; i < n; ++i) {
      if (!fds[i].revents) continue;
      int fd = fds[i].fd;
      if (fd == c.stdin_fd) {
        auto w = ::write(fd, input.data() + written, input.size() - written);
        if (w > 0) written += static_cast<std::size_t>(w);
        if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) {
          ::close(c.stdin_fd);
          c.stdin_fd = -1;
        }
        continue;
      }
      auto got = ::read(fd, buf, sizeof buf);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) {
        ::close(fd);
        (fd == c.stdout_fd ? c.stdout_fd : c.stderr_fd) = -1;
        continue;
      }
      (fd == c.stdout_fd ? r.out : r.err).append(buf, static_cast<std::size_t>(got));
    }
  }
  for (int fd : {c.stdin_fd, c.stdout_fd, c.stderr_fd})
    if (fd >= 0) ::close(fd);
  if (timed_out) {
    ::kill(c.pid, SIGKILL);
    r.failure = "'" + argv[0] + "' did not answer within " + std::to_string(timeout.count() / 1000) + " s";
  }
  int status = 0;
  while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  // Consume a SIGPIPE raised while it was blocked, then restore the mask.
  timespec zero{};
  while (::sigtimedwait(&pipe_only, nullptr, &zero) > 0) {
  }
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? -WTERMSIG(status) : -1;
  return r;
}

struct command_thread::state {
  struct task {
    std::vector<std::string> argv;
    std::string input;
    unique_function<void(command_result)> done;
    unique_function<void(const command_result&)> answered;
  };
  asio::io_context& io;
  std::mutex m;
  std::condition_variable wake;
  std::deque<task> queue;
  bool stopping = false;
  std::thread thread;

  explicit state(asio::io_context& context) : io(context) {}

  void loop() {
    std::unique_lock lock(m);
    for (;;) {
      wake.wait(lock, [&] { return stopping || !queue.empty(); });
      if (stopping) return;
      auto t = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      auto result = run_command(t.argv, t.input);
      if (t.answered) t.answered(result);
      asio::post(io, [done = std::move(t.done), result = std::move(result)]() mutable { done(std::move(result)); });
      lock.lock();
    }
  }
};

command_thread::command_thread(asio::io_context& io) : state_(std::make_shared<state>(io)) {
  state_->thread = std::thread([s = state_.get()] { s->loop(); });
}

command_thread::~command_thread() {
  {
    std::lock_guard lock(state_->m);
    state_->stopping = true;
    state_->queue.clear();
  }
  state_->wake.notify_all();
  state_->thread.join();
}

void command_thread::run(std::vector<std::string> argv, std::string input, unique_function<void(command_result)> done,
                         unique_function<void(const command_result&)> answered) {
  {
    std::lock_guard lock(state_->m);
    state_->queue.push_back({std::move(argv), std::move(input), std::move(done), std::move(answered)});
  }
  state_->wake.notify_one();
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) {
    if (ch == '\'')
      out += "'\\''";
    else
      out += ch;
  }
  return out + "'";
}

}  // namespace fiber::detail
