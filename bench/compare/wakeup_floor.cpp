// The machine's floor for a 16-byte round trip between two processes, with no library: over a
// unix socketpair (what fiber's direct links are) and over a pair of pipes (what
// multiprocessing's SimpleQueue is), each side waiting in epoll_wait either at once ("sleeping")
// or after polling for up to 50 us with epoll_wait(0) and sched_yield() ("spin 50us", what
// fiber's wait_spin_us does). The gap between the two is what a sleeping process's wake-up
// costs here.
// Prints: wakeup floor <socketpair|pipes> <sleeping|spin 50us> rtt <us> us
#include <fcntl.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

namespace {
using clock_type = std::chrono::steady_clock;

struct ends {
  int read_fd, write_fd;
};

// Waits until `fd` is readable (polling first for `spin`), then reads what is there.
ssize_t receive(int epoll_fd, int fd, char* buf, std::size_t size, std::chrono::microseconds spin) {
  epoll_event ev{};
  auto until = clock_type::now() + spin;
  while (spin.count() > 0) {
    if (::epoll_wait(epoll_fd, &ev, 1, 0) > 0) return ::read(fd, buf, size);
    if (clock_type::now() >= until) break;
    ::sched_yield();
  }
  while (::epoll_wait(epoll_fd, &ev, 1, -1) <= 0) {
  }
  return ::read(fd, buf, size);
}

double round_trip_us(bool pipes, std::chrono::microseconds spin) {
  int down[2], up[2];
  if (pipes) {
    if (::pipe2(down, O_NONBLOCK) != 0 || ::pipe2(up, O_NONBLOCK) != 0) return -1;
  } else {
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, down) != 0) return -1;
    up[0] = down[1];  // one socket each way: the child reads and writes its own end
    up[1] = down[0];
  }
  ends parent{up[0], down[1]}, child{down[0], up[1]};
  const int warmup = 1000, rounds = 20000;
  pid_t pid = ::fork();
  ends mine = pid == 0 ? child : parent;
  int ep = ::epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, mine.read_fd, &ev);
  char buf[64];
  if (pid == 0) {
    for (;;) {
      auto n = receive(ep, mine.read_fd, buf, sizeof buf, spin);
      if (n <= 0 || buf[0] == 'q') _exit(0);
      if (::write(mine.write_fd, buf, static_cast<std::size_t>(n)) != n) _exit(1);
    }
  }
  const char* ping = "ping-0123456789!";
  clock_type::time_point t0;
  for (int i = 0; i < warmup + rounds; ++i) {
    if (i == warmup) t0 = clock_type::now();
    if (::write(mine.write_fd, ping, 16) != 16 || receive(ep, mine.read_fd, buf, sizeof buf, spin) <= 0) return -1;
  }
  double us = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / rounds;
  if (::write(mine.write_fd, "q", 1) != 1) return -1;
  ::waitpid(pid, nullptr, 0);
  for (int fd : {down[0], down[1], ep}) ::close(fd);
  if (pipes)
    for (int fd : up) ::close(fd);
  return us;
}
}  // namespace

int main() {
  for (bool pipes : {false, true})
    for (auto spin : {std::chrono::microseconds(0), std::chrono::microseconds(50)})
      std::printf("wakeup floor %s %s rtt %.1f us\n", pipes ? "pipes" : "socketpair",
                  spin.count() ? "spin 50us" : "sleeping", round_trip_us(pipes, spin));
}
