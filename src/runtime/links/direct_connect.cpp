// A child's side of a direct link: to its master's unix socket, to its host's hub, or to its
// master across a network over TLS (runtime/links/direct_connect.hpp declares them).
#include <asio/connect.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <limits>
#include <thread>

#include "core/log.hpp"
#include "fiber/error.hpp"
#include "runtime/links/direct_connect.hpp"
#include "runtime/links/direct_wire.hpp"
#include "runtime/links/lane_handshake.hpp"
#include "runtime/hubs/hub_wire.hpp"

namespace fiber::detail {

namespace {
std::shared_ptr<stream_link> greet_on(asio::local::stream_protocol::socket s, const std::string& id,
                                      const std::string& password, std::string_view greeting_word = link_greeting);
}  // namespace

std::shared_ptr<stream_link> connect_direct_link(asio::io_context& io, const std::string& endpoint, const std::string& id,
                                                 const std::string& password, std::chrono::milliseconds patience) {
  asio::local::stream_protocol::socket s(io);
  s.connect(abstract(std::string_view(endpoint).substr(direct_scheme.size())));
  auto link = greet_on(std::move(s), id, password, link_greeting_shared);
  await_lane(*link, io, patience);
  return link;
}

std::shared_ptr<stream_link> connect_hub_link(asio::io_context& io, const std::string& name, const std::string& id,
                                              const std::string& password, std::chrono::milliseconds patience) {
  auto deadline = std::chrono::steady_clock::now() + patience;
  for (auto pause = std::chrono::milliseconds(20);; pause = std::min(pause * 2, std::chrono::milliseconds(500))) {
    asio::local::stream_protocol::socket s(io);
    std::error_code ec;
    s.connect(abstract(name), ec);
    if (!ec) return greet_on(std::move(s), id, password);
    if (std::chrono::steady_clock::now() + pause >= deadline)
      throw error(ec, "no host hub listens at @" + name + " on this host (after start_timeout_ms)");
    std::this_thread::sleep_for(pause);  // the hub has not started yet
  }
}

namespace {
std::shared_ptr<stream_link> greet_on(asio::local::stream_protocol::socket s, const std::string& id,
                                      const std::string& password, std::string_view greeting_word) {
  // The master is the only peer, proven by where it listens (it bound the name before starting
  // this child): what it sends is not limited here, as over ZeroMQ.
  auto link = std::make_shared<stream_link>(std::move(s), std::numeric_limits<std::size_t>::max());
  multipart greeting;
  greeting.emplace_back(greeting_word.data(), greeting_word.size());
  greeting.emplace_back(id.data(), id.size());
  greeting.emplace_back(password.data(), password.size());
  if (auto ec = link->send_blocking(greeting)) throw error(ec, "greeting the master over its unix socket");
  return link;
}
}  // namespace

}  // namespace fiber::detail

namespace fiber::detail {

std::shared_ptr<stream_link> connect_tls_link(asio::io_context& io, const std::string& endpoint, const std::string& id,
                                              const tls_session::key& psk, std::chrono::milliseconds patience,
                                              std::chrono::milliseconds silence, link_role role) {
  auto where = std::string_view(endpoint).substr(tls_scheme.size());
  auto colon = where.rfind(':');
  if (colon == std::string_view::npos) throw error(make_error_code(std::errc::invalid_argument), "no port in " + endpoint);
  std::string host(where.substr(0, colon)), port(where.substr(colon + 1));
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  auto deadline = std::chrono::steady_clock::now() + patience;
  asio::ip::tcp::socket s(io);
  for (auto pause = std::chrono::milliseconds(20);; pause = std::min(pause * 2, std::chrono::milliseconds(500))) {
    std::error_code ec;
    asio::ip::tcp::resolver resolver(io);
    auto found = resolver.resolve(host, port, ec);
    if (!ec) asio::connect(s, found, ec);
    if (!ec) break;
    if (std::chrono::steady_clock::now() + pause >= deadline)
      throw error(ec, "connecting to the master at " + endpoint);
    std::this_thread::sleep_for(pause);  // nothing listens yet (a pod's network comes up late)
  }
  s.set_option(asio::ip::tcp::no_delay(true));
  tune_tcp(s.native_handle(), silence);
  int fd = s.native_handle();
  auto tls = std::make_unique<tls_session>(tls_session::role::client, psk);
  for (;;) {
    auto step = tls->handshake();
    std::string out;
    tls->take_output(out);
    for (std::size_t sent = 0; sent < out.size();) {
      auto n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw error(std::error_code(errno, std::system_category()), "TLS handshake with the master");
      sent += static_cast<std::size_t>(n);
    }
    if (step == tls_session::step::done) break;
    if (step == tls_session::step::failed)
      throw error(make_error_code(std::errc::permission_denied), tls->failure());
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) == 0)
      throw error(make_error_code(std::errc::timed_out), "TLS handshake with the master at " + endpoint);
    char buf[4096];
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw error(n == 0 ? make_error_code(std::errc::connection_reset) : std::error_code(errno, std::system_category()),
                              "TLS handshake with the master at " + endpoint + " (it closed the connection: does it hold this job's key?)");
    tls->feed(buf, static_cast<std::size_t>(n));
  }
  auto family = s.local_endpoint().protocol().family();
  auto executor = s.get_executor();
  stream_link::socket_type g(executor, asio::generic::stream_protocol(family, SOCK_STREAM), s.release());
  // The master is proven by the key: what it sends is not limited here, as over ZeroMQ.
  auto link = std::make_shared<stream_link>(std::move(g), std::numeric_limits<std::size_t>::max(), std::move(tls));
  multipart greeting;
  auto said = role == link_role::hub ? hub_greeting : link_greeting;
  greeting.emplace_back(said.data(), said.size());
  greeting.emplace_back(id.data(), id.size());
  greeting.emplace_back();  // no password: the handshake proved the key
  if (auto ec = link->send_blocking(greeting)) throw error(ec, "greeting the master over TLS");
  return link;
}

}  // namespace fiber::detail
