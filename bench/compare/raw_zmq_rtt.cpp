// The transport's floor for fiber's channels: raw ZeroMQ ROUTER <-> DEALER over ipc between two
// processes, 16-byte round trips, with and without CURVE (fiber always uses CURVE).
// Prints one line per configuration: the median round trip in microseconds.
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {
struct keys {
  char server_pub[41], server_sec[41], client_pub[41], client_sec[41];
};

// The echo server: a ROUTER, like fiber's master.
void serve(const std::string& endpoint, bool curve, const keys& k, int rounds, int ready_fd) {
  void* ctx = zmq_ctx_new();
  void* s = zmq_socket(ctx, ZMQ_ROUTER);
  if (curve) {
    int one = 1;
    zmq_setsockopt(s, ZMQ_CURVE_SERVER, &one, sizeof one);
    zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, k.server_sec, 40);
  }
  zmq_bind(s, endpoint.c_str());
  char c = 1;
  (void)write(ready_fd, &c, 1);
  char id[256], buf[64];
  for (int i = 0; i < rounds; ++i) {
    int idn = zmq_recv(s, id, sizeof id, 0);
    int n = zmq_recv(s, buf, sizeof buf, 0);
    zmq_send(s, id, idn, ZMQ_SNDMORE);
    zmq_send(s, buf, n, 0);
  }
  zmq_close(s);
  zmq_ctx_term(ctx);
}

double median_rtt_us(bool curve, int rounds) {
  keys k{};
  zmq_curve_keypair(k.server_pub, k.server_sec);
  zmq_curve_keypair(k.client_pub, k.client_sec);
  std::string endpoint = "ipc://@fiber-raw-rtt-" + std::to_string(getpid()) + (curve ? "-curve" : "-plain");
  int ready[2];
  if (pipe(ready) != 0) return -1;
  pid_t pid = fork();  // before this process has a ZeroMQ context
  if (pid == 0) {
    serve(endpoint, curve, k, rounds, ready[1]);
    _exit(0);
  }
  char c;
  (void)read(ready[0], &c, 1);
  void* ctx = zmq_ctx_new();
  void* s = zmq_socket(ctx, ZMQ_DEALER);
  if (curve) {
    zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, k.server_pub, 40);
    zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, k.client_pub, 40);
    zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, k.client_sec, 40);
  }
  zmq_connect(s, endpoint.c_str());
  char payload[16];
  std::memset(payload, 'x', sizeof payload);
  std::vector<double> samples;
  for (int i = 0; i < rounds; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    zmq_send(s, payload, sizeof payload, 0);
    zmq_recv(s, payload, sizeof payload, 0);
    if (i >= 200) samples.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  zmq_close(s);
  zmq_ctx_term(ctx);
  waitpid(pid, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}
}  // namespace

int main() {
  const int rounds = 10200;
  std::printf("raw_zmq router/dealer ipc 16B rtt plain %.1f us\n", median_rtt_us(false, rounds));
  std::printf("raw_zmq router/dealer ipc 16B rtt curve %.1f us\n", median_rtt_us(true, rounds));
}
