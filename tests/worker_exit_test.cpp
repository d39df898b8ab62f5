// How a child leaves, tried in a real forked process: what it wrote through stdio arrives, and
// no static destructor of the program runs (those are the master's run's).
#include "runtime/worker_exit.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace {
int destructor_fd = -1;
struct says_at_exit {
  ~says_at_exit() {
    if (destructor_fd >= 0) (void)!::write(destructor_fd, "destructor", 10);
  }
};
says_at_exit at_exit_of_the_program;

std::string read_all(int fd) {
  std::string out;
  char buf[256];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  return out;
}
}  // namespace

TEST(worker_exit, output_is_flushed_and_no_static_destructor_runs) {
  int out[2], dtor[2];
  ASSERT_EQ(::pipe(out), 0);
  ASSERT_EQ(::pipe(dtor), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(out[0]);
    ::close(dtor[0]);
    destructor_fd = dtor[1];
    std::FILE* f = ::fdopen(out[1], "w");
    std::setvbuf(f, nullptr, _IOFBF, 4096);  // held in the buffer until flushed
    std::fputs("buffered words", f);
    fiber::detail::exit_worker(7);
  }
  ::close(out[1]);
  ::close(dtor[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  EXPECT_EQ(read_all(out[0]), "buffered words");
  EXPECT_EQ(read_all(dtor[0]), "") << "a static destructor ran in the child";
  ::close(out[0]);
  ::close(dtor[0]);
}
