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
  if (!e.starts_with("tcp://")) return "127.0.0.1";
  auto hostport = e.substr(6);
  auto host = hostport.substr(0, hostport.rfind(':'));
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  if (::getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || !res) return "127.0.0.1";
  std::string ip = "127.0.0.1";
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s >= 0 && ::connect(s, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof local;
    char text[INET_ADDRSTRLEN];
    if (::getsockname(s, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text))
      ip = text;
  }
  if (s >= 0) ::close(s);
  ::freeaddrinfo(res);
  return ip;
}

}  // namespace fiber::detail
