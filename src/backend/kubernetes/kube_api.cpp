#include "backend/kubernetes/kube_api.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>

#include "core/log.hpp"
#include "fiber/error.hpp"

namespace fiber::detail::kube {
namespace {

using clock = std::chrono::steady_clock;
constexpr int max_throttled_retries = 10;  // 429s in a row before the request fails
constexpr int max_server_retries = 3;      // 5xx and dropped connections
constexpr auto request_timeout = std::chrono::seconds(30);

std::string trimmed(std::string s, std::size_t most = 300) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s.size() > most ? s.substr(0, most) + "..." : s;
}

}  // namespace

std::string status_message(const boost::json::value& body) {
  if (!body.is_object()) return {};
  auto& o = body.as_object();
  if (auto* m = o.if_contains("message"); m && m->is_string()) return std::string(m->as_string());
  return {};
}

struct api::pending {
  std::string method, path, body;
  verb_on what;
  done_fn done;
  bool limited = false;
  int throttled = 0, failed = 0;
  bool renewed = false;  // the token was read again after a 401 once already
  std::optional<clock::time_point> trouble_since;  // its first failure, while the server is waited for
};

api::api(asio::io_context& io, access where, double qps, int burst)
    : io_(io), where_(std::move(where)), http_(io), qps_(qps), tokens_(burst), burst_(burst), refilled_(clock::now()),
      queue_timer_(io) {}

api::~api() { *alive_ = false; }

void api::call(std::string method, std::string path, std::string body, verb_on what, done_fn done, bool limited) {
  auto p = std::make_shared<pending>();
  p->method = std::move(method);
  p->path = std::move(path);
  p->body = std::move(body);
  p->what = std::move(what);
  p->done = std::move(done);
  p->limited = limited;
  if (limited) return admit(std::move(p));
  send(std::move(p));
}

void api::admit(std::shared_ptr<pending> p) {
  queue_.push_back(std::move(p));
  drain_queue();
}

/// The token bucket: `burst` at once, then `qps` a second.
void api::drain_queue() {
  auto now = clock::now();
  tokens_ = std::min<double>(burst_, tokens_ + std::chrono::duration<double>(now - refilled_).count() * qps_);
  refilled_ = now;
  while (!queue_.empty() && tokens_ >= 1) {
    tokens_ -= 1;
    auto p = std::move(queue_.front());
    queue_.pop_front();
    send(std::move(p));
  }
  if (queue_.empty() || queue_armed_) return;
  queue_armed_ = true;
  queue_timer_.expires_after(std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>((1 - tokens_) / qps_)));
  queue_timer_.async_wait([this, alive = alive_](std::error_code ec) {
    if (ec || !*alive) return;
    queue_armed_ = false;
    drain_queue();
  });
}

void api::send(std::shared_ptr<pending> p) {
  http_request req;
  req.method = p->method;
  req.timeout = request_timeout;
  try {
    where_.prepare(req, p->path);
  } catch (const std::exception& e) {  // the token file or plugin failed
    auto done = std::move(p->done);
    return asio::post(io_, [done = std::move(done), why = std::string(e.what())]() mutable {
      done(make_error_code(errc::config_error), 0, {}, why);
    });
  }
  req.headers.emplace_back("Accept", "application/json");
  if (!p->body.empty()) {
    req.headers.emplace_back("Content-Type", p->method == "PATCH" ? "application/merge-patch+json" : "application/json");
    req.body = p->body;
  }
  ++sent_;
  http_.start(std::move(req), [this, p, alive = alive_](std::error_code ec, const http_response& r) mutable {
    if (!*alive) return;
    answered(std::move(p), ec, r);
  });
}

void api::answered(std::shared_ptr<pending> p, std::error_code ec, const http_response& r) {
  // Within the patience for an API server that answered before: a restart is waited for.
  auto patient = [this, &p] {
    if (!reached_) return false;
    auto now = clock::now();
    if (!p->trouble_since) p->trouble_since = now;
    return now - *p->trouble_since < outage_patience;
  };
  auto backoff = [&p] { return std::chrono::milliseconds(std::min(200 * p->failed, 2000)); };
  auto retry_after = [this, p](std::chrono::milliseconds delay) {
    auto t = std::make_shared<asio::steady_timer>(io_, delay);
    t->async_wait([this, p, t, alive = alive_](std::error_code e) {
      if (e || !*alive) return;
      if (p->limited) admit(p);
      else send(p);
    });
  };
  if (ec) {
    if (ec == asio::error::operation_aborted) return p->done(ec, 0, {}, "cancelled");
    if (ec != make_error_code(errc::timeout) && (++p->failed <= max_server_retries || patient())) {
      logf(p->failed > max_server_retries ? log_level::warn : log_level::debug, p->what.verb, " ", p->what.resource,
           " failed (", ec.message(), "); again in ", backoff().count(), " ms");
      return retry_after(backoff());
    }
    return p->done(make_error_code(errc::backend_unavailable), 0, {},
                   "the Kubernetes API server at " + where_.server + " did not answer " + p->what.verb + " " +
                       p->what.resource + " (" + ec.message() + "): is it running and reachable from here? (credentials from " +
                       where_.source + ")");
  }
  boost::json::value body;
  {
    boost::system::error_code jec;
    body = boost::json::parse(r.body, jec);
    if (jec) body = nullptr;
  }
  reached_ = true;
  if (r.status >= 200 && r.status < 300) {
    granted_.insert(p->what.verb + " " + p->what.resource);
    return p->done({}, r.status, std::move(body), {});
  }
  if (r.status == 401 && !p->renewed && where_.tokens->can_renew()) {
    // A rotated token: read it again (or run the plugin again) and try once more.
    p->renewed = true;
    where_.tokens->refused();
    return send(std::move(p));
  }
  if (r.status == 429 && ++p->throttled <= max_throttled_retries) {
    auto seconds = std::atoi(r.header("retry-after").c_str());
    logf(log_level::debug, "the Kubernetes API server throttles ", p->what.verb, " ", p->what.resource, ": again in ",
         seconds, " s");
    return retry_after(std::chrono::seconds(std::clamp(seconds, 1, 60)));
  }
  if ((r.status == 500 || r.status == 502 || r.status == 503 || r.status == 504) &&
      (++p->failed <= max_server_retries || patient()))
    return retry_after(std::chrono::milliseconds(std::min(500 * p->failed, 2000)));
  if ((r.status == 401 || r.status == 403) && granted(p->what) && patient()) {
    // Allowed a moment ago: an API server that has just started refuses everything until its
    // authorizer has loaded the cluster's roles (and its authenticator the keys).
    ++p->failed;
    logf(log_level::debug, "the Kubernetes API server refuses ", p->what.verb, " ", p->what.resource,
         " that it allowed before (", r.status, "): again in ", backoff().count(), " ms");
    if (r.status == 401) where_.tokens->refused();
    return retry_after(backoff());
  }
  auto code = r.status == 401 || r.status == 403 ? make_error_code(errc::backend_unavailable)
                                                 : make_error_code(errc::spawn_failed);
  auto why = failure_text(*p, r.status, body);
  p->done(code, r.status, std::move(body), std::move(why));
}

std::string api::failure_text(const pending& p, long status, const boost::json::value& body) const {
  auto said = status_message(body);
  auto action = p.what.verb + " " + p.what.resource;
  switch (status) {
    case 401:
      return "the Kubernetes API server at " + where_.server + " refused the credentials from " +
             where_.tokens->describe() + " (401 Unauthorized" +
             (where_.tokens->can_renew() ? ", also after reading them again" : "") +
             "): they are wrong or expired; renew them (for a kubeconfig: log in again, e.g. with your cloud's CLI)";
    case 403:
      return "the Kubernetes API server forbids " + action + ": " + (said.empty() ? "403 Forbidden" : said) +
             ". Grant the Role in " + rbac_manifest + " to this user or service account (kubectl apply -f " +
             rbac_manifest + ")";
    case 429:
      return "the Kubernetes API server kept throttling " + action + " (429 Too Many Requests, " +
             std::to_string(max_throttled_retries) + " tries): lower kubernetes_qps or ask the cluster's admins";
    default:
      return "the Kubernetes API server refused " + action + " (HTTP " + std::to_string(status) + "): " +
             (said.empty() ? trimmed(boost::json::serialize(body)) : said);
  }
}

std::uint64_t api::stream(const std::string& path, std::chrono::milliseconds timeout, verb_on what, line_fn on_line,
                          stream_done_fn done) {
  http_request req;
  req.timeout = timeout;
  try {
    where_.prepare(req, path);
  } catch (const std::exception& e) {
    asio::post(io_, [done = std::move(done), why = std::string(e.what())]() mutable {
      done(make_error_code(errc::config_error), 0, why);
    });
    return 0;
  }
  req.headers.emplace_back("Accept", "application/json");
  ++sent_;
  struct line_state {
    std::string partial, seen;  // `seen`: the start of the body, for an error's message
    line_fn on_line;
  };
  auto st = std::make_shared<line_state>();
  st->on_line = std::move(on_line);
  return http_.start(
      std::move(req),
      [this, st, what = std::move(what), done = std::move(done), alive = alive_](std::error_code ec,
                                                                                  const http_response& r) mutable {
        if (!*alive) return;
        if (!st->partial.empty()) st->on_line(std::exchange(st->partial, {}));
        if (ec) {
          if (ec == asio::error::operation_aborted) return done(ec, 0, "cancelled");
          return done(ec == make_error_code(errc::timeout) ? ec : make_error_code(errc::backend_unavailable), 0,
                      "the stream " + what.verb + " " + what.resource + " from " + where_.server + " broke: " + ec.message());
        }
        if (r.status >= 200 && r.status < 300) return done({}, r.status, {});
        if (r.status == 401) where_.tokens->refused();  // the next stream reads it again
        boost::system::error_code jec;
        auto body = boost::json::parse(st->seen, jec);
        pending p;
        p.what = what;
        done(r.status == 401 || r.status == 403 ? make_error_code(errc::backend_unavailable)
                                                : make_error_code(errc::spawn_failed),
             r.status, failure_text(p, r.status, jec ? boost::json::value(nullptr) : body));
      },
      [st](std::string_view chunk) {
        if (st->seen.size() < 4096) st->seen.append(chunk.substr(0, 4096 - st->seen.size()));
        st->partial.append(chunk);
        std::size_t start = 0;
        for (auto nl = st->partial.find('\n'); nl != std::string::npos; nl = st->partial.find('\n', start)) {
          if (nl > start) st->on_line(std::string_view(st->partial).substr(start, nl - start));
          start = nl + 1;
        }
        st->partial.erase(0, start);
      });
}

void api::cancel(std::uint64_t id) {
  if (id) http_.cancel(id);
}

}  // namespace fiber::detail::kube
