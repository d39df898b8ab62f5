#include "runtime/observe/dashboard.hpp"

#include "core/token_file.hpp"

#include <asio/ip/address.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <cstdio>
#include <random>

#include "fiber/error.hpp"
#include "transport/http_server.hpp"

namespace fiber::detail {

struct dashboard::state {
  state(asio::io_context& io, dashboard_view v, std::chrono::milliseconds every)
      : view(std::move(v)), interval(every), ticker(io), updated(io) {
    updated.expires_at(asio::steady_timer::time_point::max());
  }
  dashboard_view view;
  std::chrono::milliseconds interval;
  asio::steady_timer ticker;
  // Used as an event: streams wait on it, and each sample cancels their waits.
  asio::steady_timer updated;
  std::uint64_t generation = 0;  // ticks taken
  // The page's state as JSON, taken when a page's stream first wants it after a tick and shared
  // by every stream: with no page open the master ticks (the plot's history needs every tick)
  // but describes no worker and serializes nothing.
  std::string latest;
  std::uint64_t latest_generation = 0;
  const std::string& latest_text() {
    if (latest_generation != generation) {
      latest = boost::json::serialize(view.sample());
      latest_generation = generation;
    }
    return latest;
  }
  bool closed = false;
};

bool dashboard_token_matches(std::string_view given, std::string_view token) {
  unsigned char diff = given.size() == token.size() ? 0 : 1;
  for (std::size_t i = 0; i < token.size(); ++i) diff |= static_cast<unsigned char>(token[i] ^ (i < given.size() ? given[i] : 0));
  return diff == 0;
}

void dashboard_headers(http_reply& r, bool page) {
  r.headers.emplace_back("Cache-Control", "no-store");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  // Nothing but the page's own inline script and style, and its own address for the events.
  if (page)
    r.headers.emplace_back("Content-Security-Policy",
                           "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                           "connect-src 'self'; img-src data:");
}

http_reply dashboard_refusal() {
  http_reply reply;
  dashboard_headers(reply, false);
  reply.status = 403;
  reply.body = "fiber dashboard: this page needs the token of its run: open the address the run printed "
               "(\"fiber: dashboard of run ... at http://...?token=...\"), or fiber::context::dashboard_url()\n";
  return reply;
}

dashboard::dashboard(asio::io_context& io, const fiber::config& cfg, dashboard_view view)
    : state_(std::make_shared<state>(io, std::move(view), std::chrono::milliseconds(cfg.dashboard_interval_ms))),
      token_(token_in_file(env_dashboard_token_file)) {
  // A token shorter than a random one is not taken: the page would be easier to guess.
  token_from_file_ = token_.size() >= 32;
  if (!token_from_file_) token_ = random_token();
  try {
    auto admit = [token = token_](const http_served_request& r) -> std::optional<http_reply> {
      if (dashboard_token_matches(r.query("token"), token)) return std::nullopt;
      return dashboard_refusal();
    };
    server_ = std::make_unique<http_server>(io, cfg.dashboard_address, static_cast<std::uint16_t>(cfg.dashboard_port),
                                            http_server_options{}, admit,
                                            [st = state_](const http_served_request& r) { return answer(st, r); });
  } catch (const std::system_error& e) {
    throw error(errc::config_error, "the dashboard cannot listen on " + cfg.dashboard_address + " port " +
                                        std::to_string(cfg.dashboard_port) + ": " + e.code().message() +
                                        "; set dashboard_port to a free port (0: one the system picks) and "
                                        "dashboard_address to an address of this host, or turn dashboard off");
  }
  auto address = cfg.dashboard_address;
  if (address == "0.0.0.0" || address == "::") address = "127.0.0.1";
  if (address.find(':') != std::string::npos) address = "[" + address + "]";
  url_ = "http://" + address + ":" + std::to_string(server_->port()) + "/?token=" + token_;
}

dashboard::~dashboard() { close(); }

std::string dashboard::printed_url() const {
  if (!token_from_file_) return url_;
  return url_.substr(0, url_.find('?')) + " (its token is in the run's Secret: fiber dashboard RUN)";
}

dashboard_view& dashboard::view() noexcept { return state_->view; }

void dashboard::start() {
  server_->start();
  tick();
}

void dashboard::close() {
  if (state_->closed) return;
  state_->closed = true;
  state_->ticker.cancel();
  state_->updated.cancel();
  if (server_) server_->close();
}

void dashboard::tick() {
  auto& s = *state_;
  if (s.closed) return;
  s.view.tick();
  ++s.generation;
  s.updated.cancel();
  s.ticker.expires_after(s.interval);
  // `this` outlives the wait: close() (from the destructor too) cancels it and sets `closed`.
  s.ticker.async_wait([this, alive = std::weak_ptr<state>(state_)](std::error_code ec) {
    if (auto st = alive.lock(); st && !ec && !st->closed) tick();
  });
}

http_reply dashboard::answer(const std::shared_ptr<state>& st_ptr, const http_served_request& r) {
  auto& st = *st_ptr;
  http_reply reply;
  auto path = r.path();
  dashboard_headers(reply, path == "/");
  if (r.method != "GET") {
    reply.status = 405;
    reply.body = "fiber dashboard: only GET is served\n";
    return reply;
  }
  if (path == "/") {
    reply.content_type = "text/html; charset=utf-8";
    reply.body = std::string(dashboard_page());
  } else if (path == "/state") {
    // Taken now: a script that just changed the run sees it (the events carry the samples).
    reply.content_type = "application/json";
    reply.body = boost::json::serialize(st.view.sample());
  } else if (path == "/events") {
    reply.content_type = "text/event-stream";
    reply.body = "retry: 2000\n\n";
    reply.stream = [st = st_ptr, seen = std::uint64_t{0}]() mutable -> asio::awaitable<std::string> {
      while (!st->closed && seen == st->generation) {
        std::error_code ec;
        co_await st->updated.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      }
      if (st->closed) co_return std::string();
      seen = st->generation;
      co_return "data: " + st->latest_text() + "\n\n";
    };
  } else {
    reply.status = 404;
    reply.body = "fiber dashboard: no page " + path + " (the page is /, its data /state and /events)\n";
  }
  return reply;
}

}  // namespace fiber::detail
