// Shared test helpers.
#pragma once
#include <dirent.h>
#include <fiber/error.hpp>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace fiber_test {
/// True for fiber's fork server (by its process name), which belongs to a context and ends with
/// it. The children it forks are named otherwise, so they still count as children.
inline bool is_fork_server(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  std::getline(in, comm);
  return comm == "fiber-forksrv";
}

/// Pids of this process's children, live or zombie, read from /proc; fiber's fork servers are
/// listed only when `with_fork_servers`.
inline std::vector<int> child_pids(bool with_fork_servers = false) {
  std::vector<int> out;
  auto me = getpid();
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (auto* e = readdir(d)) {
    int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == me &&
        (with_fork_servers || !is_fork_server(pid)))
      out.push_back(pid);
  }
  closedir(d);
  return out;
}

/// Runs `f`, which must throw fiber::error with `code` and a message containing each of `mentions`.
template <class F>
void expect_error(F&& f, fiber::errc code, std::initializer_list<std::string_view> mentions) {
  try {
    f();
    ADD_FAILURE() << "expected fiber::error " << fiber::make_error_code(code).message();
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (auto m : mentions) EXPECT_NE(std::string_view(e.what()).find(m), std::string_view::npos) << e.what();
  }
}
template <class F>
void expect_error(F&& f, fiber::errc code, std::string_view mentions = "") {
  expect_error(std::forward<F>(f), code, {mentions});
}
}  // namespace fiber_test
