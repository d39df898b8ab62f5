// The live dashboard of a run (config dashboard, off by default): the master serves one page on
// its loop, with its state (runtime/observe/dashboard_view) sampled every dashboard_interval_ms and sent
// to open pages as server-sent events. Bound to dashboard_address (this host only by default);
// every request must carry the run's random token, which is in the URL the master prints, so
// another user of the host, or a page of another site, reads nothing.
//
//   GET /?token=T        the page (self-contained: no request leaves for another host)
//   GET /state?token=T   the state now (taken for this request), as JSON
//   GET /events?token=T  the state at each sample, as server-sent events ("data: {json}")
#pragma once
#include <asio/io_context.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "fiber/config.hpp"
#include "core/random_token.hpp"
#include "runtime/observe/dashboard_view.hpp"

namespace fiber::detail {

class http_server;
struct http_served_request;
struct http_reply;

/// The page's HTML, script and style (runtime/observe/dashboard_page.cpp).
std::string_view dashboard_page();
/// Whether `given` is `token`, compared in a time that does not depend on where they differ.
bool dashboard_token_matches(std::string_view given, std::string_view token);
/// What every answer about a run carries (not to be kept, framed or referred from); for the page
/// itself (`page`), a policy that lets it run its own inline script and reach its own address only.
void dashboard_headers(http_reply& r, bool page);
/// The answer to a request without the run's token.
http_reply dashboard_refusal();
/// Where a master in a `fiber run` pod finds its page's token (the run's Secret, mounted): it
/// then prints its page's address without it, since the pod's log is read by whoever may read
/// the namespace; `fiber dashboard` takes the token from the Secret.
inline constexpr const char* env_dashboard_token_file = "FIBER_INTERNAL_DASHBOARD_TOKEN_FILE";

class dashboard {
 public:
  /// Listens now; throws fiber::error(config_error) naming dashboard_address and dashboard_port
  /// when it cannot (the port taken, an address not this host's).
  dashboard(asio::io_context& io, const fiber::config& cfg, dashboard_view view);
  ~dashboard();
  dashboard(const dashboard&) = delete;
  dashboard& operator=(const dashboard&) = delete;

  /// On the loop: takes requests and samples the run every dashboard_interval_ms.
  void start();
  /// http://ADDRESS:PORT/?token=TOKEN (an address that takes every one is written as 127.0.0.1).
  const std::string& url() const noexcept { return url_; }
  /// What the master prints: url(), or without its token when the token came from a file.
  std::string printed_url() const;
  const std::string& token() const noexcept { return token_; }
  dashboard_view& view() noexcept;
  /// On the loop: stops serving and sampling; open pages' streams end. Idempotent.
  void close();

 private:
  struct state;
  /// A request that carried the run's token (the server's admission checked it).
  static http_reply answer(const std::shared_ptr<state>& st, const http_served_request& r);
  void tick();
  // shared with the streams, which may outlive this object by a turn of the loop
  std::shared_ptr<state> state_;
  std::string token_, url_;
  bool token_from_file_ = false;
  std::unique_ptr<http_server> server_;
};

}  // namespace fiber::detail
