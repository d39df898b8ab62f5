// The floor under a master's fan-out: one server process keeps two 64-byte messages in flight to
// each of N clients, which echo them, each a single-threaded process blocked in read(); no
// framework, no encryption. Over a unix socket it is the floor of the local direct links; over TCP
// to clients in the Slurm test nodes' network namespaces (bench/compare/run.sh envelope starts
// them with `ip netns exec`) the floor of the cluster path. With `hub`, each node's clients sit
// behind one relay process on their node, reached over a unix socket; the server speaks to the
// relays over TCP, each message carrying its client's index, and writes what one wake-up produced
// for a relay in one write, as the relay does back: the floor of a per-host hub. Prints wall and
// server CPU per message.
//
//   fanout_floor server unix|tcp N MESSAGES [ADDRESS]   (tcp: listens on ADDRESS, port 47123)
//   fanout_floor client unix COUNT | client tcp ADDRESS COUNT
//   fanout_floor server hub RELAYS MESSAGES ADDRESS | relay ADDRESS COUNT
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {
constexpr int message = 64;
constexpr int port = 47123;
const char* const unix_name = "fiber-fanout-floor";

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}
bool read_all(int fd, char* b, int n) {
  for (int got = 0; got < n;) {
    auto r = read(fd, b + got, n - got);
    if (r <= 0) return false;
    got += static_cast<int>(r);
  }
  return true;
}
/// Adds `fd` to epoll set `ep`, readable events reported as `index`.
void watch(int ep, int fd, unsigned index) {
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u32 = index;
  epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
}
sockaddr_un unix_address(socklen_t& len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strcpy(a.sun_path + 1, unix_name);  // abstract
  len = static_cast<socklen_t>(sizeof(sa_family_t) + 1 + std::strlen(unix_name));
  return a;
}
sockaddr_in tcp_address(const char* host) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, host, &a.sin_addr);
  return a;
}
int connect_to(bool tcp, const char* host) {
  for (int tries = 0;;) {
    int fd = socket(tcp ? AF_INET : AF_UNIX, SOCK_STREAM, 0);
    int r;
    if (tcp) {
      auto a = tcp_address(host);
      r = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    } else {
      socklen_t len;
      auto a = unix_address(len);
      r = connect(fd, reinterpret_cast<sockaddr*>(&a), len);
    }
    if (r == 0) return fd;
    int why = errno;
    close(fd);
    // The server is not listening yet (run.sh waits for its socket first, so this is rare): try
    // again for at most 30 s, then say so rather than wait forever.
    if ((why != ECONNREFUSED && why != ENOENT) || ++tries > 3000) {
      std::fprintf(stderr, "fanout_floor: no server at %s after %d tries: %s\n", tcp ? host : unix_name, tries,
                   std::strerror(why));
      std::exit(1);
    }
    usleep(10000);
  }
}

int clients(bool tcp, const char* host, int count) {
  for (int i = 0; i < count; ++i)
    if (fork() == 0) {
      int fd = connect_to(tcp, host);
      char b[message];
      while (read_all(fd, b, message))
        if (write(fd, b, message) != message) break;
      _exit(0);
    }
  while (wait(nullptr) > 0) {
  }
  return 0;
}

int server(bool tcp, int n, long total, const char* host) {
  int l = socket(tcp ? AF_INET : AF_UNIX, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (tcp) {
    auto a = tcp_address(host);
    if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return perror("bind"), 1;
  } else {
    socklen_t len;
    auto a = unix_address(len);
    if (bind(l, reinterpret_cast<sockaddr*>(&a), len) != 0) return perror("bind"), 1;
  }
  listen(l, 4096);
  std::vector<int> fds(n);
  int ep = epoll_create1(0);
  for (int i = 0; i < n; ++i) {
    fds[i] = accept(l, nullptr, nullptr);
    if (tcp) setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    watch(ep, fds[i], static_cast<unsigned>(i));
  }
  char b[message] = {};
  long sent = 0, got = 0;
  auto t0 = std::chrono::steady_clock::now();
  double c0 = cpu_seconds();
  for (int k = 0; k < 2; ++k)
    for (int i = 0; i < n; ++i, ++sent)
      if (write(fds[i], b, message) != message) return 1;
  epoll_event ev[256];
  while (got < total) {
    int m = epoll_wait(ep, ev, 256, -1);
    for (int j = 0; j < m; ++j) {
      int fd = fds[ev[j].data.u32];
      if (!read_all(fd, b, message)) return std::fprintf(stderr, "a client left\n"), 1;
      ++got;
      if (sent < total && write(fd, b, message) == message) ++sent;
    }
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double cpu = cpu_seconds() - c0;
  std::printf("fanout_floor %s clients=%d messages=%ld wall_us_per_message=%.2f server_cpu_us_per_message=%.2f\n",
              tcp ? "tcp" : "unix", n, total, wall * 1e6 / double(total), cpu * 1e6 / double(total));
  for (int fd : fds) close(fd);
  return 0;
}
// The hub's records: a 4-byte client index, then the message.
constexpr int record = 4 + message;

void set_nonblocking(int fd) {
  int one = 1;
  ioctl(fd, FIONBIO, &one);
}
bool write_all(int fd, const char* b, std::size_t n) {
  while (n > 0) {
    auto r = write(fd, b, n);
    if (r < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, -1);
      continue;
    }
    if (r <= 0) return false;
    b += r, n -= static_cast<std::size_t>(r);
  }
  return true;
}

/// One node's relay: forks `count` unix clients, then carries records between them and the server.
int relay(const char* host, int count) {
  int l = socket(AF_UNIX, SOCK_STREAM, 0);
  socklen_t len;
  auto a = unix_address(len);  // abstract: one per network namespace, so one per node
  if (bind(l, reinterpret_cast<sockaddr*>(&a), len) != 0) return perror("bind"), 1;
  listen(l, 4096);
  for (int i = 0; i < count; ++i)
    if (fork() == 0) {
      close(l);
      int fd = connect_to(false, nullptr);
      char b[message];
      while (read_all(fd, b, message))
        if (write(fd, b, message) != message) break;
      _exit(0);
    }
  std::vector<int> fds(count);
  int ep = epoll_create1(0);
  for (int i = 0; i < count; ++i) {
    fds[i] = accept(l, nullptr, nullptr);
    watch(ep, fds[i], static_cast<unsigned>(i));
  }
  int up = connect_to(true, host);
  std::uint32_t c = static_cast<std::uint32_t>(count);
  if (write(up, &c, 4) != 4) return 1;
  set_nonblocking(up);
  watch(ep, up, static_cast<unsigned>(count));
  std::string in, out;
  char buf[1 << 16];
  epoll_event ev[256];
  for (;;) {
    int m = epoll_wait(ep, ev, 256, -1);
    for (int j = 0; j < m; ++j) {
      unsigned i = ev[j].data.u32;
      if (i == static_cast<unsigned>(count)) {
        for (;;) {
          auto r = read(up, buf, sizeof buf);
          if (r == 0) {
            for (int fd : fds) close(fd);
            while (wait(nullptr) > 0) {
            }
            return 0;
          }
          if (r < 0) break;
          in.append(buf, static_cast<std::size_t>(r));
        }
        std::size_t k = 0;
        for (; k + record <= in.size(); k += record) {
          std::uint32_t to;
          std::memcpy(&to, in.data() + k, 4);
          if (write(fds[to], in.data() + k + 4, message) != message) return 1;
        }
        in.erase(0, k);
      } else {
        char b[message];
        if (!read_all(fds[i], b, message)) return 1;
        out.append(reinterpret_cast<const char*>(&i), 4).append(b, message);
      }
    }
    if (!out.empty() && !write_all(up, out.data(), out.size())) return 1;
    out.clear();
  }
}

int hub_server(int relays, long total, const char* host) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  auto a = tcp_address(host);
  if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return perror("bind"), 1;
  listen(l, 64);
  std::vector<int> fds(relays);
  std::vector<std::string> in(relays), out(relays);
  int ep = epoll_create1(0), clients = 0;
  std::vector<std::uint32_t> counts(relays);
  for (int r = 0; r < relays; ++r) {
    fds[r] = accept(l, nullptr, nullptr);
    setsockopt(fds[r], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!read_all(fds[r], reinterpret_cast<char*>(&counts[r]), 4)) return 1;
    clients += static_cast<int>(counts[r]);
    set_nonblocking(fds[r]);
    watch(ep, fds[r], static_cast<unsigned>(r));
  }
  char b[message] = {};
  long sent = 0, got = 0;
  auto t0 = std::chrono::steady_clock::now();
  double c0 = cpu_seconds();
  for (int r = 0; r < relays; ++r) {
    for (int k = 0; k < 2; ++k)
      for (std::uint32_t i = 0; i < counts[r]; ++i, ++sent)
        out[r].append(reinterpret_cast<const char*>(&i), 4).append(b, message);
    if (!write_all(fds[r], out[r].data(), out[r].size())) return 1;
    out[r].clear();
  }
  char buf[1 << 16];
  epoll_event ev[64];
  while (got < total) {
    int m = epoll_wait(ep, ev, 64, -1);
    for (int j = 0; j < m; ++j) {
      int r = static_cast<int>(ev[j].data.u32);
      for (;;) {
        auto n = read(fds[r], buf, sizeof buf);
        if (n == 0) return std::fprintf(stderr, "a relay left\n"), 1;
        if (n < 0) break;
        in[r].append(buf, static_cast<std::size_t>(n));
      }
      std::size_t k = 0;
      for (; k + record <= in[r].size(); k += record, ++got)
        if (sent < total) out[r].append(in[r].data() + k, record), ++sent;
      in[r].erase(0, k);
    }
    for (int r = 0; r < relays; ++r)
      if (!out[r].empty()) {
        if (!write_all(fds[r], out[r].data(), out[r].size())) return 1;
        out[r].clear();
      }
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double cpu = cpu_seconds() - c0;
  std::printf("fanout_floor hub clients=%d relays=%d messages=%ld wall_us_per_message=%.2f server_cpu_us_per_message=%.2f\n",
              clients, relays, total, wall * 1e6 / double(total), cpu * 1e6 / double(total));
  for (int fd : fds) close(fd);
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && std::string(argv[1]) == "client") {
    bool tcp = std::string(argv[2]) == "tcp";
    return clients(tcp, tcp ? argv[3] : nullptr, std::atoi(argv[tcp ? 4 : 3]));
  }
  if (argc == 4 && std::string(argv[1]) == "relay") return relay(argv[2], std::atoi(argv[3]));
  if (argc >= 6 && std::string(argv[1]) == "server" && std::string(argv[2]) == "hub")
    return hub_server(std::atoi(argv[3]), std::atol(argv[4]), argv[5]);
  if (argc >= 5 && std::string(argv[1]) == "server") {
    bool tcp = std::string(argv[2]) == "tcp";
    return server(tcp, std::atoi(argv[3]), std::atol(argv[4]), argc > 5 ? argv[5] : "127.0.0.1");
  }
  std::fprintf(stderr, "usage: fanout_floor server unix|tcp N MESSAGES [ADDRESS] | client unix COUNT | client tcp ADDRESS COUNT | server hub RELAYS MESSAGES ADDRESS | relay ADDRESS COUNT\n");
  return 2;
}
