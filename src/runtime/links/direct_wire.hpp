// What both sides of a direct link agree on (runtime/links/direct_listener, the master's;
// runtime/links/direct_connect, a child's): the endpoints' schemes, who greets, the greetings and
// their bound, the abstract address, the TCP tuning.
#pragma once
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <asio/local/stream_protocol.hpp>
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace fiber::detail {
/// The endpoint scheme children see for a master's direct links: "unix:@<abstract name>".
inline constexpr std::string_view direct_scheme = "unix:@";
/// ... and across a network: "tls://<host>:<port>".
inline constexpr std::string_view tls_scheme = "tls://";

/// Who greets on a link: a child, or a host hub carrying its host's children's messages
/// (runtime/hubs/hub_wire, runtime/hubs/host_hub).
enum class link_role { child, hub };

// A child's first message: this, its routing id, the job's password.
inline constexpr std::string_view link_greeting = "fiber direct link 1";
// ... and a host hub's (runtime/hubs/hub_wire).
inline constexpr std::string_view hub_greeting = "fiber hub link 1";
// Enough for the greeting of any routing id and password.
inline constexpr std::size_t greeting_limit = 1024;

inline asio::local::stream_protocol::endpoint abstract(std::string_view name) {
  return asio::local::stream_protocol::endpoint(std::string(1, '\0') + std::string(name));
}

/// TCP gives up on a peer that takes no bytes for `silence` (a host that went away), and probes an
/// idle connection so that it does.
inline void tune_tcp(int fd, std::chrono::milliseconds silence) {
  int on = 1;
  unsigned timeout = static_cast<unsigned>(std::max<long long>(silence.count(), 1000));
  int idle = static_cast<int>(std::max<long long>(silence.count() / 3000, 1));  // seconds
  int count = 3;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout, sizeof timeout);
}

}  // namespace fiber::detail
