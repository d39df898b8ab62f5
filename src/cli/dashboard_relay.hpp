// `fiber dashboard RUN`: the page of a run's master, which runs in a container, a pod or a Slurm
// job, served on this machine's 127.0.0.1. The master prints its page's address with its token
// ("fiber: dashboard of run ID at http://...:PORT/?token=T", runtime/observe/dashboard); the command reads
// it from the master's output, and relays each request of the browser to the master's port,
// reached as the engine allows (a container's address, a Slurm node's, the Kubernetes API
// server's pod proxy), the page's live events as they come.
//
// The relay asks the master's page only for what that page serves ("/", "/state", "/events"), with
// a target it builds itself: the request is sent on with this user's credentials (on Kubernetes,
// to the API server), so nothing a client sends may choose which path of that server is called.
#pragma once
#include <asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace fiber::detail {
struct http_request;
}

namespace fiber::cli {

struct printed_dashboard {
  int port = 0;
  std::string token;
};

/// The last dashboard address a master printed in `output`; nullopt when it printed none.
std::optional<printed_dashboard> dashboard_in_output(std::string_view output);

/// Addresses a request for `target` (a path and its query) to the master's page: its URL and,
/// for an API server's proxy, its credentials.
using dashboard_route = std::function<void(detail::http_request&, const std::string& target)>;

/// What to ask the master's page for when a client asks for `path`: the path and the master's
/// token, built here; nullopt for a path the page does not serve (the client gets 404).
std::optional<std::string> dashboard_upstream_target(std::string_view path, std::string_view token);

/// The relay on a caller's io_context: takes requests on 127.0.0.1:`local_port` (0: a free port),
/// refuses those without the master's token before reading further, and sends each of the page's
/// own paths on through `route`.
class dashboard_relay {
 public:
  dashboard_relay(asio::io_context& io, const printed_dashboard& at, dashboard_route route, int local_port);
  ~dashboard_relay();
  dashboard_relay(const dashboard_relay&) = delete;
  dashboard_relay& operator=(const dashboard_relay&) = delete;
  std::uint16_t port() const;
  void start();
  void close();

 private:
  struct state;
  std::unique_ptr<state> s_;
};

/// Serves the page of run `run` on 127.0.0.1:`local_port` (0: a free port), each request checked
/// against the master's token here and sent on through `route`, until SIGINT or SIGTERM. Prints
/// the page's address with the token on stdout first. Returns the exit status (0).
int relay_dashboard(const std::string& run, const printed_dashboard& at, dashboard_route route, int local_port);

}  // namespace fiber::cli
