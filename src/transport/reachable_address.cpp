#include "transport/reachable_address.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "core/worker_env.hpp"

namespace fiber::detail {

std::string reachable_address() {
  const char* endpoint = std::getenv(env_endpoint);
  std::string e = endpoint ? endpoint : "";
  if (!e.starts_with("tcp://") && !e.starts_with("tls://")) return "127.0.0.1";  // ZeroMQ, or a direct link over TLS
  auto hostport = e.substr(6);
  auto ip = source_address_towards(hostport.substr(0, hostport.rfind(':')));
  return ip.empty() ? "127.0.0.1" : ip;
}

std::string source_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || !found) return {};
  std::string out;
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {  // UDP: no packet is sent
    sockaddr_in local{};
    socklen_t len = sizeof local;
    char text[INET_ADDRSTRLEN] = {};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text))
      out = text;
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  return out;
}

}  // namespace fiber::detail
