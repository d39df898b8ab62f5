#include "cli/dashboard_relay.hpp"

#include <asio/io_context.hpp>
#include <asio/redirect_error.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <cstdio>
#include <deque>
#include <memory>
#include <regex>

#include "runtime/observe/dashboard.hpp"
#include "transport/http_client.hpp"
#include "transport/http_server.hpp"

namespace fiber::cli {
namespace {

/// One request relayed: what the master's page answered so far, read by the local answer's
/// stream. The upstream request is cancelled when the local client goes (its stream is dropped).
struct relayed : std::enable_shared_from_this<relayed> {
  relayed(asio::io_context& io, detail::http_client& client) : http(client), arrived(io) {
    arrived.expires_at(asio::steady_timer::time_point::max());
  }
  ~relayed() {
    if (!ended) http.cancel(id);
  }
  void start(detail::http_request req) {
    id = http.start(
        std::move(req),
        [weak = weak_from_this()](std::error_code ec, const detail::http_response& r) {
          auto self = weak.lock();
          if (!self) return;
          self->ended = true;
          if (ec && !self->any)
            self->pieces.push_back("fiber dashboard: the run's page did not answer (" + ec.message() +
                                   "): has the run ended? `fiber ps` says\n");
          else if (!ec && r.status != 200 && !self->any)
            self->pieces.push_back(r.body);
          self->arrived.cancel();
        },
        [weak = weak_from_this()](std::string_view chunk) {
          auto self = weak.lock();
          if (!self || chunk.empty()) return;
          self->any = true;
          self->pieces.emplace_back(chunk);
          self->arrived.cancel();
        });
  }
  asio::awaitable<std::string> next() {
    while (pieces.empty() && !ended) {
      std::error_code ec;
      co_await arrived.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    std::string out;
    for (auto& p : pieces) out += p;
    pieces.clear();
    co_return out;  // empty once the master's answer ended and all of it went
  }

  detail::http_client& http;
  asio::steady_timer arrived;  // an event: each piece (and the end) cancels its waits
  std::uint64_t id = 0;
  std::deque<std::string> pieces;
  bool ended = false, any = false;
};

}  // namespace

std::optional<printed_dashboard> dashboard_in_output(std::string_view output) {
  // Its token follows, unless the master keeps it in its run's Secret (a pod's log is read by
  // whoever may read the namespace).
  static const std::regex line(R"(fiber: dashboard of run \S+ at http://\S+:([0-9]+)/(?:\?token=([0-9a-f]+))?)");
  std::optional<printed_dashboard> found;
  std::string text(output);
  for (std::sregex_iterator it(text.begin(), text.end(), line), end; it != end; ++it)
    found = printed_dashboard{std::stoi((*it)[1].str()), (*it)[2].str()};
  return found;
}

std::optional<std::string> dashboard_upstream_target(std::string_view path, std::string_view token) {
  if (path != "/" && path != "/state" && path != "/events") return std::nullopt;
  // The token is hex (dashboard_in_output took only hex digits): nothing in it needs escaping.
  return std::string(path) + "?token=" + std::string(token);
}

struct dashboard_relay::state {
  state(asio::io_context& context, const printed_dashboard& where, dashboard_route how, int local_port)
      : io(context), http(context), at(where), route(std::move(how)),
        server(context, "127.0.0.1", static_cast<std::uint16_t>(local_port), detail::http_server_options{},
               [this](const detail::http_served_request& r) { return admit(r); },
               [this](const detail::http_served_request& r) { return answer(r); }) {}

  std::optional<detail::http_reply> admit(const detail::http_served_request& r) const {
    if (!detail::dashboard_token_matches(r.query("token"), at.token)) return detail::dashboard_refusal();
    if (r.method != "GET" || !dashboard_upstream_target(r.path(), at.token)) {
      detail::http_reply refusal;
      detail::dashboard_headers(refusal, false);
      refusal.status = 404;
      refusal.body = "fiber dashboard: the relay serves only the run's page: GET /, /state and /events\n";
      return refusal;
    }
    return std::nullopt;
  }

  detail::http_reply answer(const detail::http_served_request& r) {
    detail::http_reply reply;
    auto path = r.path();
    detail::dashboard_headers(reply, path == "/");
    reply.content_type = path == "/"         ? "text/html; charset=utf-8"
                         : path == "/state"  ? "application/json"
                                             : "text/event-stream";
    detail::http_request req;
    route(req, dashboard_upstream_target(path, at.token).value());  // admission let only the page's paths in
    // The events last as long as the run; a page or its state comes at once.
    req.timeout = path == "/events" ? std::chrono::milliseconds(0) : std::chrono::milliseconds(30000);
    auto one = std::make_shared<relayed>(io, http);
    one->start(std::move(req));
    reply.stream = [one]() { return one->next(); };
    return reply;
  }

  asio::io_context& io;
  detail::http_client http;
  printed_dashboard at;
  dashboard_route route;
  detail::http_server server;
};

dashboard_relay::dashboard_relay(asio::io_context& io, const printed_dashboard& at, dashboard_route route, int local_port)
    : s_(std::make_unique<state>(io, at, std::move(route), local_port)) {}
dashboard_relay::~dashboard_relay() { close(); }
std::uint16_t dashboard_relay::port() const { return s_->server.port(); }
void dashboard_relay::start() { s_->server.start(); }
void dashboard_relay::close() { s_->server.close(); }

int relay_dashboard(const std::string& run, const printed_dashboard& at, dashboard_route route, int local_port) {
  asio::io_context io;
  dashboard_relay relay(io, at, std::move(route), local_port);
  relay.start();
  std::printf("fiber: the dashboard of run %s: http://127.0.0.1:%u/?token=%s (Ctrl-C ends this)\n", run.c_str(),
              static_cast<unsigned>(relay.port()), at.token.c_str());
  std::fflush(stdout);
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](std::error_code, int) {
    relay.close();
    io.stop();
  });
  io.run();
  return 0;
}

}  // namespace fiber::cli
