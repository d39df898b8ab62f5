// What a worker forked by the fork server (backend/zygote) holds: none of the fork server's own
// descriptors (its link to the master, its spare's socket, its ZeroMQ context's mailbox), only
// what the master gave both. Compared by the kernel (kcmp), file by file.
#include <linux/kcmp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <fiber/fiber.hpp>
#include <string>
#include <vector>

#include "backend/zygote.hpp"
#include "proc_children.hpp"
#include "support.hpp"

namespace {
int own_pid() { return static_cast<int>(::getpid()); }

std::vector<int> descriptors_of(int pid) {
  std::vector<int> fds;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec))
    fds.push_back(std::atoi(e.path().filename().c_str()));
  return fds;
}

// Whether descriptor `a` of process `pa` and `b` of `pb` are one open file.
bool same_file(int pa, int a, int pb, int b) {
  return ::syscall(SYS_kcmp, pa, pb, KCMP_FILE, a, b) == 0;
}

std::string comm_of(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  std::getline(in, comm);
  return comm;
}
}  // namespace
FIBER_REMOTE(own_pid);

TEST(fork_server, a_forked_worker_holds_none_of_the_fork_servers_own_descriptors) {
  FIBER_TEST_LOCAL_ONLY("compares the descriptors of this process's children");
  fiber::pool p(1);
  const int worker = p.apply(&own_pid).get();
  int server = 0;
  for (int pid : fiber_test::child_pids(true))
    if (comm_of(pid) == fiber::detail::fork_server_name) server = pid;
  ASSERT_GT(server, 0) << "no fork server among this process's children";
  const int master = static_cast<int>(::getpid());
  auto of_master = descriptors_of(master);
  int compared = 0, given = 0;
  for (int s : descriptors_of(server)) {
    bool given_by_master = false;  // stdin, stdout, stderr: the master's, shared by every child
    for (int m : of_master) given_by_master = given_by_master || same_file(master, m, server, s);
    if (given_by_master) {
      ++given;
      continue;
    }
    ++compared;
    for (int w : descriptors_of(worker))
      EXPECT_FALSE(same_file(worker, w, server, s)) << "the worker's descriptor " << w << " is the fork server's " << s;
  }
  EXPECT_GT(compared, 0) << "the fork server has no descriptor of its own: nothing was compared";
  EXPECT_GT(given, 0) << "kcmp found none of the master's descriptors in the fork server: it cannot compare here";
}
