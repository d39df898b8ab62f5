// The Kubernetes API as the backend uses it: JSON requests and line streams (watches, logs) on
// an io_context, with what every careful client does: a token re-read after 401, 429 answered
// after its Retry-After, a rate limit (queries per second with a burst), an API server that goes
// away for a while (restarted, upgraded) waited for, and errors in the server's own words
// (`Status.message`) with what to do about them.
#pragma once
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <boost/json/value.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <system_error>

#include "backend/kubernetes/kube_access.hpp"
#include "fiber/detail/unique_function.hpp"
#include "transport/http_client.hpp"

namespace fiber::detail::kube {

/// What a request is, for messages: "create pods", "list pods".
struct verb_on {
  std::string verb, resource;
};

/// The RBAC manifest that grants what the backend does.
inline constexpr const char* rbac_manifest = "containers/kubernetes/rbac.yaml";

class api {
 public:
  /// `qps`/`burst`: the rate limit for requests made with `limited` (creates and deletes).
  api(asio::io_context& io, access where, double qps, int burst);
  ~api();

  /// `status` is the HTTP status (0 when the server did not answer); `ec` is set for anything
  /// but 2xx, and `why` then says what went wrong and what to do.
  using done_fn = unique_function<void(std::error_code ec, long status, boost::json::value body, std::string why)>;
  void call(std::string method, std::string path, std::string body, verb_on what, done_fn done, bool limited = false);

  /// A streaming GET (a watch, a followed log): `on_line` gets each line as it completes; `done`
  /// once the stream ends (ec: the stream failed; `why` says how). Returns an id for cancel().
  using line_fn = unique_function<void(std::string_view)>;
  using stream_done_fn = unique_function<void(std::error_code ec, long status, std::string why)>;
  std::uint64_t stream(const std::string& path, std::chrono::milliseconds timeout, verb_on what, line_fn on_line,
                       stream_done_fn done);
  void cancel(std::uint64_t id);

  const access& where() const noexcept { return where_; }
  /// True once a request of this kind has succeeded: a refusal of it later is more likely an API
  /// server that has just restarted (its authorizer still loading) than a right taken away.
  bool granted(const verb_on& what) const { return granted_.contains(what.verb + " " + what.resource); }
  /// How long an API server that answered before may stay away, or refuse what it allowed, before
  /// a request fails: a restart or an upgrade of the control plane takes seconds to a minute.
  static constexpr std::chrono::seconds outage_patience{60};
  /// Requests sent so far (retries included), for the benchmark's request count.
  std::uint64_t requests_sent() const noexcept { return sent_; }

 private:
  struct pending;
  void send(std::shared_ptr<pending> p);
  void answered(std::shared_ptr<pending> p, std::error_code ec, const http_response& r);
  void admit(std::shared_ptr<pending> p);
  void drain_queue();
  std::string failure_text(const pending& p, long status, const boost::json::value& body) const;

  asio::io_context& io_;
  access where_;
  http_client http_;
  // Token bucket for limited requests.
  double qps_, tokens_;
  int burst_;
  std::chrono::steady_clock::time_point refilled_;
  std::deque<std::shared_ptr<pending>> queue_;
  asio::steady_timer queue_timer_;
  bool queue_armed_ = false;
  std::uint64_t sent_ = 0;
  bool reached_ = false;            // the server has answered once
  std::set<std::string> granted_;  // "verb resource" that has succeeded
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

/// A name's value for a Kubernetes `Status` body: `message` when the body is one, else "".
std::string status_message(const boost::json::value& body);

}  // namespace fiber::detail::kube
