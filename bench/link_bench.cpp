// What a direct link costs per round trip of a small message, by what it runs on: a unix socket
// (children on this host), shared memory (a child on this host once its master gave it a lane;
// here neither side spins, so each message rings a doorbell), TCP without encryption, and TCP
// with TLS 1.3 (remote_transport=direct, children on other hosts). A second thread echoes on a loop of its own; both threads' CPU per
// round trip is `cpu_us_per_round_trip`. The difference between the last two is TLS's share.
// The _8MB variants send a task's 8 MB argument each way instead (MB/s counts both ways).
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <unistd.h>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/local/connect_pair.hpp>
#include <future>
#include <thread>

#include "runtime/links/direct_listener.hpp"
#include "runtime/links/direct_connect.hpp"
#include "transport/shared_lane.hpp"
#include "transport/stream_link.hpp"

using namespace fiber::detail;

namespace {
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](timeval t) { return t.tv_sec + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

std::size_t message_bytes = 40;  // a small task's arguments; 8 MB in the _8MB variants

multipart small_message() {
  multipart m;
  m.emplace_back(std::string(24, 'h'));  // a header's size
  m.emplace_back(std::string(message_bytes, 'p'));
  return m;
}

/// Round trips from `a` (driven here on `io`) to what echoes on `echo_io` (run on a thread of its
/// own).
void round_trips(benchmark::State& state, asio::io_context& io, stream_link& a, asio::io_context& echo_io) {
  std::size_t got = 0;
  a.start([&](multipart) { ++got; }, [](std::error_code) {});
  auto guard = asio::make_work_guard(echo_io);
  std::thread echo([&] { echo_io.run(); });
  double cpu0 = process_cpu_seconds();
  std::size_t n = 0;
  for (auto _ : state) {
    a.send(small_message());
    ++n;
    while (got < n) io.run_one();
  }
  state.counters["cpu_us_per_round_trip"] = (process_cpu_seconds() - cpu0) * 1e6 / double(n);
  state.SetBytesProcessed(static_cast<std::int64_t>(2 * n * message_bytes));
  guard.reset();
  a.close();
  echo_io.stop();
  echo.join();
}

/// Echoes what `b` receives.
void echo_on(const std::shared_ptr<stream_link>& b) {
  b->start([b = b.get()](multipart m) { b->send(std::move(m)); }, [](std::error_code) {});
}

/// Two links on a unix socketpair; with `shared`, their bytes through shared memory.
void unix_pair(benchmark::State& state, bool shared) {
  asio::io_context io, echo_io;
  asio::local::stream_protocol::socket sa(io), sb(echo_io);
  asio::local::connect_pair(sa, sb);
  auto a = std::make_shared<stream_link>(std::move(sa), 1 << 24);
  auto b = std::make_shared<stream_link>(std::move(sb), 1 << 24);
  if (shared) {
    auto made = shared_channel::make(shared_lane::link_capacity, /*populate=*/false);
    auto joined = made ? shared_channel::join(::dup(made->segment_fd()), ::dup(made->dialer_bell()),
                                              ::dup(made->acceptor_bell()), false)
                       : nullptr;
    if (!joined || !a->use_lane(shared_lane::open(io, std::move(made))) ||
        !b->use_lane(shared_lane::open(echo_io, std::move(joined))))
      return state.SkipWithError("this host gives no shared memory");
  }
  echo_on(b);
  round_trips(state, io, *a, echo_io);
}
void unix_socket(benchmark::State& state) { unix_pair(state, false); }
void shared_memory(benchmark::State& state) { unix_pair(state, true); }

std::pair<stream_link::socket_type, stream_link::socket_type> tcp_pair(asio::io_context& io, asio::io_context& echo_io) {
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  asio::ip::tcp::socket a(io), b(echo_io);
  a.connect(acceptor.local_endpoint());
  acceptor.accept(b);
  a.set_option(asio::ip::tcp::no_delay(true));
  b.set_option(asio::ip::tcp::no_delay(true));
  auto generic = [](asio::ip::tcp::socket s) {
    auto executor = s.get_executor();
    return stream_link::socket_type(executor, asio::generic::stream_protocol(AF_INET, SOCK_STREAM), s.release());
  };
  return {generic(std::move(a)), generic(std::move(b))};
}

void tcp_plain(benchmark::State& state) {
  asio::io_context io, echo_io;
  auto [sa, sb] = tcp_pair(io, echo_io);
  auto a = std::make_shared<stream_link>(std::move(sa), 1 << 24);
  auto b = std::make_shared<stream_link>(std::move(sb), 1 << 24);
  echo_on(b);
  round_trips(state, io, *a, echo_io);
}

void tcp_tls(benchmark::State& state) {
  asio::io_context io, echo_io;
  auto key = tls_session::key_for("bench");
  std::shared_ptr<direct_listener> listener;
  listener = std::make_shared<direct_listener>(
      echo_io, "", 1 << 24, std::chrono::seconds(10), [](const std::string&) { return true; },
      [&](const std::string& id, multipart&& m) { (void)listener->send(id, std::move(m)); });
  auto bound = listener->listen_tcp("127.0.0.1", key, std::chrono::seconds(1), std::chrono::seconds(60));
  auto child = std::async(std::launch::async, [&] {
    return connect_tls_link(io, "tls://" + bound.substr(6), "1", key, std::chrono::seconds(10), std::chrono::seconds(60));
  });
  while (child.wait_for(std::chrono::seconds(0)) != std::future_status::ready) echo_io.run_one_for(std::chrono::milliseconds(10));
  auto a = child.get();
  round_trips(state, io, *a, echo_io);  // the master's side echoes, on its listener's loop
  listener->close();
}

/// `link`'s benchmark with a task's 8 MB argument each way.
template <void (*link)(benchmark::State&)>
void eight_megabytes(benchmark::State& state) {
  message_bytes = 8'000'000;
  link(state);
  message_bytes = 40;
}
}  // namespace

BENCHMARK(unix_socket)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(shared_memory)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(tcp_plain)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(tcp_tls)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(eight_megabytes<unix_socket>)->Name("unix_socket_8MB")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(eight_megabytes<shared_memory>)->Name("shared_memory_8MB")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(eight_megabytes<tcp_plain>)->Name("tcp_plain_8MB")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(eight_megabytes<tcp_tls>)->Name("tcp_tls_8MB")->UseRealTime()->Unit(benchmark::kMillisecond);
