// Headless Chromium driven by its DevTools protocol over a pipe (--remote-debugging-pipe: the
// browser reads commands on its fd 3 and writes answers and events on its fd 4, each message JSON
// ended by a NUL), so a test needs no WebSocket client and no port. One page, attached in flat
// mode (its commands carry the session id).
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "run_folder.hpp"

extern char** environ;

namespace fiber_test {

/// The Chromium of this machine (Debian's package), or "" when there is none.
inline std::string chromium_path() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
    if (::access(p, X_OK) == 0) return p;
  return {};
}

/// Where a browser test keeps what a person may want to look at (screenshots): FIBER_TEST_ARTIFACTS,
/// else build/test-artifacts.
inline std::filesystem::path artifacts() {
  const char* dir = std::getenv("FIBER_TEST_ARTIFACTS");
  std::filesystem::path p = dir && *dir ? dir : std::filesystem::path(FIBER_TEST_BUILD_DIR) / "test-artifacts";
  std::filesystem::create_directories(p);
  return p;
}

class chromium {
 public:
  /// Starts a headless browser with a fresh profile and opens an empty page. Each answer is
  /// awaited at most `patience`: a browser that stops answering fails the test, not hangs it.
  explicit chromium(std::chrono::seconds patience = std::chrono::seconds(60)) : patience_(patience) {
    profile_ = fiber_test::run_folder() / ("fiber-chromium-" + std::to_string(::getpid()));
    std::filesystem::create_directories(profile_);
    int to[2], from[2];
    if (::pipe(to) != 0 || ::pipe(from) != 0) throw std::runtime_error("pipe failed");
    // Above 4, so that placing them at 3 and 4 in the child cannot overwrite one with the other.
    int to_read = ::fcntl(to[0], F_DUPFD_CLOEXEC, 10), from_write = ::fcntl(from[1], F_DUPFD_CLOEXEC, 10);
    ::close(to[0]);
    ::close(from[1]);
    write_fd_ = to[1];
    read_fd_ = from[0];
    ::fcntl(write_fd_, F_SETFD, FD_CLOEXEC);
    ::fcntl(read_fd_, F_SETFD, FD_CLOEXEC);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to_read, 3);
    posix_spawn_file_actions_adddup2(&fa, from_write, 4);
    // Its chatter (it tries the network at start, which is closed here) is not the test's output.
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    std::vector<std::string> args = {chromium_path(), "--headless", "--no-sandbox", "--disable-gpu",
                                     "--disable-quic", "--no-first-run", "--disable-background-networking",
                                     "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                                     "--window-size=1280,1000", "--remote-debugging-pipe",
                                     "--user-data-dir=" + profile_.string(), "about:blank"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = ::posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(to_read);
    ::close(from_write);
    if (rc != 0) throw std::runtime_error("could not start " + args[0]);
    auto target = call("Target.createTarget", {{"url", "about:blank"}}, false);
    auto attached = call("Target.attachToTarget", {{"targetId", target.at("targetId")}, {"flatten", true}}, false);
    session_ = std::string(attached.at("sessionId").as_string());
    call("Page.enable", {});
  }
  ~chromium() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(write_fd_);
    ::close(read_fd_);
    std::error_code ec;
    std::filesystem::remove_all(profile_, ec);
  }
  chromium(const chromium&) = delete;
  chromium& operator=(const chromium&) = delete;

  /// Opens `url` in the page and waits for its load.
  void go(const std::string& url) {
    events_.clear();
    call("Page.navigate", {{"url", url}});
    wait_event("Page.loadEventFired");
  }

  /// The value of a script expression in the page; a promise is awaited. Throws with the page's
  /// error when it throws.
  boost::json::value eval(const std::string& expression) {
    auto r = call("Runtime.evaluate", {{"expression", expression}, {"awaitPromise", true}, {"returnByValue", true}});
    if (auto* ex = r.if_contains("exceptionDetails"))
      throw std::runtime_error("the page's script failed: " + boost::json::serialize(*ex));
    auto& result = r.at("result").as_object();
    auto* v = result.if_contains("value");
    return v ? *v : boost::json::value();
  }

  /// The browser's process (its renderers are its descendants).
  pid_t pid() const { return pid_; }

  /// The page as a PNG.
  std::string screenshot() {
    auto r = call("Page.captureScreenshot", {{"format", "png"}, {"captureBeyondViewport", true}});
    return base64_decode(r.at("data").as_string());
  }

 private:
  boost::json::object call(const std::string& method, boost::json::object params, bool in_page = true) {
    auto id = ++next_id_;
    boost::json::object m{{"id", id}, {"method", method}, {"params", std::move(params)}};
    if (in_page) m["sessionId"] = session_;
    auto text = boost::json::serialize(m);
    text.push_back('\0');
    for (std::size_t at = 0; at < text.size();) {
      auto n = ::write(write_fd_, text.data() + at, text.size() - at);
      if (n <= 0) throw std::runtime_error("Chromium took no more commands (it ended?)");
      at += static_cast<std::size_t>(n);
    }
    for (;;) {
      auto msg = next_message(method);
      auto* got = msg.if_contains("id");
      if (!got || got->to_number<std::uint64_t>() != id) continue;
      if (auto* e = msg.if_contains("error")) throw std::runtime_error(method + " failed: " + boost::json::serialize(*e));
      return msg.at("result").as_object();
    }
  }

  void wait_event(const std::string& name) {
    for (auto& e : events_)
      if (e == name) {
        events_.clear();
        return;
      }
    for (;;)
      if (auto m = next_message(name); m.contains("method") && m.at("method").as_string() == name) return;
  }

  boost::json::object next_message(const std::string& waiting_for) {
    auto deadline = std::chrono::steady_clock::now() + patience_;
    for (;;) {
      if (auto nul = in_.find('\0'); nul != std::string::npos) {
        auto msg = boost::json::parse(std::string_view(in_).substr(0, nul)).as_object();
        in_.erase(0, nul + 1);
        if (auto* m = msg.if_contains("method"); m && m->is_string()) events_.emplace_back(m->as_string());
        return msg;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{read_fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0)
        throw std::runtime_error("Chromium did not answer " + waiting_for + " in " + std::to_string(patience_.count()) + " s");
      char buf[65536];
      auto n = ::read(read_fd_, buf, sizeof buf);
      if (n <= 0) throw std::runtime_error("Chromium ended while the test waited for " + waiting_for);
      in_.append(buf, static_cast<std::size_t>(n));
    }
  }

  static std::string base64_decode(std::string_view s) {
    auto value = [](char c) -> int {
      if (c >= 'A' && c <= 'Z') return c - 'A';
      if (c >= 'a' && c <= 'z') return c - 'a' + 26;
      if (c >= '0' && c <= '9') return c - '0' + 52;
      return c == '+' ? 62 : c == '/' ? 63 : -1;
    };
    std::string out;
    unsigned bits = 0;
    int have = 0;
    for (char c : s) {
      int v = value(c);
      if (v < 0) continue;  // padding
      bits = (bits << 6) | static_cast<unsigned>(v);
      have += 6;
      if (have >= 8) {
        have -= 8;
        out.push_back(static_cast<char>((bits >> have) & 0xff));
      }
    }
    return out;
  }

  std::chrono::seconds patience_;
  std::filesystem::path profile_;
  pid_t pid_ = -1;
  int write_fd_ = -1, read_fd_ = -1;
  std::uint64_t next_id_ = 0;
  std::string session_, in_;
  std::vector<std::string> events_;  // the events seen, for wait_event
};

}  // namespace fiber_test
