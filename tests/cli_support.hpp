// Running the `fiber` command in tests (tests/cli_test.cpp on Docker, cli_slurm_test.cpp on Slurm).
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <csignal>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "backend/command.hpp"

namespace fiber_test {

struct command_outcome {
  int code = -1;
  std::string out;  // stdout and stderr together
};

/// The fiber command with `args` (shell words), run to its end; `env`: "K=V ..." before it.
inline command_outcome fiber_cmd(const std::string& args, const std::string& env = {}) {
  std::string cmd = env + " " FIBER_TEST_CLI " " + args + " 2>&1";
  command_outcome r;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
    int status = ::pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  return r;
}

/// Starts the fiber command with `argv` (after the program), reads its stdout until a whole line
/// that `wanted` accepts, calls `then` with it while the command still runs, then stops it with
/// SIGINT (a follow detaches): that line, or "" when the command ended first.
template <class Pred>
std::string line_of(const std::vector<std::string>& argv, Pred wanted,
                    const std::function<void(const std::string&)>& then = nullptr) {
  std::vector<std::string> full{FIBER_TEST_CLI};
  full.insert(full.end(), argv.begin(), argv.end());
  auto child = fiber::detail::spawn_command(full, {.pipe_stdout = true});
  std::string seen, found;
  char buf[4096];
  while (found.empty()) {
    auto nl = seen.find('\n');
    if (nl != std::string::npos) {
      auto line = seen.substr(0, nl);
      seen.erase(0, nl + 1);
      if (wanted(line)) found = line;
      continue;
    }
    auto n = ::read(child.stdout_fd, buf, sizeof buf);
    if (n <= 0) break;
    seen.append(buf, static_cast<std::size_t>(n));
  }
  if (!found.empty() && then) then(found);
  ::kill(child.pid, SIGINT);
  ::close(child.stdout_fd);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  return found;
}

/// A line of digits only (what tests/orphan_master.cpp prints once its child runs).
inline bool a_pid(const std::string& line) {
  return !line.empty() && line.find_first_not_of("0123456789") == std::string::npos;
}

/// The body curl gets from `url` (with the HTTP status after it on a line of its own).
inline std::string curl_get(const std::string& url) {
  std::string out;
  if (FILE* p = ::popen(("curl -s --max-time 30 -w '\\n%{http_code}' '" + url + "'").c_str(), "r")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

/// What `fiber dashboard NAME` (`argv`: the backend's words, "dashboard", the name) serves here
/// while the run's master runs: its page's state, and the answer to a request without the token.
struct relayed_page {
  std::string address, state, refused;
};
inline relayed_page through_dashboard(const std::vector<std::string>& argv) {
  relayed_page page;
  page.address = line_of(
      argv, [](const std::string& l) { return l.find("http://127.0.0.1:") != std::string::npos; },
      [&](const std::string& line) {
        auto url = line.substr(line.find("http://"));
        url = url.substr(0, url.find(' '));
        auto query = url.find("/?token=");
        page.state = curl_get(url.substr(0, query) + "/state" + url.substr(query + 1));
        page.refused = curl_get(url.substr(0, query) + "/state");
      });
  return page;
}

/// What tests/orphan_master's page says through `fiber dashboard`: its run, on `backend`, with
/// its child running; and nothing without the token.
inline void expect_orphan_masters_page(const relayed_page& page, const std::string& backend) {
  ASSERT_FALSE(page.address.empty()) << "fiber dashboard printed no address";
  auto status = page.state.substr(page.state.rfind('\n') + 1);
  ASSERT_EQ(status, "200") << page.state;
  auto state = boost::json::parse(page.state.substr(0, page.state.rfind('\n'))).as_object();
  EXPECT_EQ(state.at("program").as_string(), "orphan_master");
  EXPECT_EQ(state.at("backend").as_string(), backend);
  EXPECT_EQ(state.at("processes").at("running").to_number<int>(), 1) << page.state;
  EXPECT_TRUE(page.refused.ends_with("\n403")) << page.refused;
  EXPECT_NE(page.refused.find("needs the token of its run"), std::string::npos) << page.refused;
}

}  // namespace fiber_test
