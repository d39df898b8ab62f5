// ring_member::framework_env: the environment other frameworks' rendezvous expects, with rank 0's
// port bound before it is published.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "fiber/ring.hpp"
#include "primitives/ring/mesh.hpp"

namespace fiber {

namespace {
/// The interface that holds `ip` ("lo" for loopback); empty when none does.
std::string interface_of(const std::string& ip) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return {};
  std::string name;
  for (auto* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    auto* in = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) && ip == text) {
      name = a->ifa_name;
      break;
    }
  }
  ::freeifaddrs(list);
  return name;
}
}  // namespace

ring_member::framework_rendezvous ring_member::framework_env() const {
  framework_rendezvous out;
  auto address = detail::reachable_address();
  if (rank_ == 0) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 128) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      auto why = std::string(std::strerror(errno));
      if (fd >= 0) ::close(fd);
      throw error(errc::spawn_failed, "rank 0 cannot listen on a TCP port for the framework's rendezvous: " + why);
    }
    out.listen_fd = fd;
    set("fiber/framework", address + ":" + std::to_string(ntohs(a.sin_port))).get();
  }
  auto master = get("fiber/framework").get();
  auto colon = master.rfind(':');
  auto ifname = interface_of(address);
  out.env = {{"MASTER_ADDR", master.substr(0, colon)},
             {"MASTER_PORT", master.substr(colon + 1)},
             {"RANK", std::to_string(rank_)},
             {"WORLD_SIZE", std::to_string(size_)},
             {"LOCAL_RANK", std::to_string(local_rank())},
             {"LOCAL_WORLD_SIZE", std::to_string(local_size())}};
  if (!ifname.empty()) {
    out.env.emplace_back("GLOO_SOCKET_IFNAME", ifname);
    out.env.emplace_back("NCCL_SOCKET_IFNAME", ifname);
  }
  for (auto& [k, v] : out.env) ::setenv(k.c_str(), v.c_str(), 1);
  return out;
}

}  // namespace fiber
