#include "runtime/links/reattach_dial.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <system_error>

#include "fiber/error.hpp"
#include "runtime/links/reattach_wire.hpp"

namespace fiber::detail {
namespace {
[[noreturn]] void lost(const char* what) {
  throw std::system_error(errno ? errno : ECONNRESET, std::generic_category(), what);
}
}  // namespace

namespace {
/// A connected socket to point `name`: an abstract unix socket's name, or "tcp:HOST:PORT".
int connect_to(const std::string& name, std::chrono::milliseconds patience) {
  bool tcp = name.starts_with("tcp:");
  sockaddr_storage storage{};
  socklen_t length = 0;
  if (tcp) {
    auto colon = name.rfind(':');
    auto& in = reinterpret_cast<sockaddr_in&>(storage);
    in.sin_family = AF_INET;
    unsigned long port = 0;
    try {
      port = std::stoul(name.substr(colon + 1));
    } catch (const std::exception&) {
      port = 0;
    }
    if (colon <= 4 || port == 0 || port > 65535 || ::inet_pton(AF_INET, name.substr(4, colon - 4).c_str(), &in.sin_addr) != 1)
      throw error(errc::protocol_error, "a reattach point's name is not tcp:IPV4:PORT: " + name);
    in.sin_port = htons(static_cast<std::uint16_t>(port));
    length = sizeof in;
  } else {
    auto& un = reinterpret_cast<sockaddr_un&>(storage);
    if (name.size() + 1 > sizeof un.sun_path)
      throw error(errc::protocol_error, "a reattach point's name is longer than a unix socket's");
    un.sun_family = AF_UNIX;
    std::memcpy(un.sun_path + 1, name.data(), name.size());
    length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  }
  int fd = ::socket(tcp ? AF_INET : AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) lost("a socket to dial a worker");
  auto ms = patience.count();
  timeval wait{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>(ms % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof wait);
  errno = 0;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&storage), length) != 0) {
    int e = errno;
    ::close(fd);
    errno = e;
    lost("dialling a worker's reattach point");
  }
  return fd;
}
}  // namespace

reattach_dial::reattach_dial(const std::string& name, const std::string& secret, std::chrono::milliseconds patience,
                             std::size_t state_limit) {
  fd_ = connect_to(name, patience);
  try {
    // On this host the kernel says who answers; over TCP only the proofs do.
    if (!name.starts_with("tcp:")) {
      ucred peer{};
      socklen_t size = sizeof peer;
      if (::getsockopt(fd_, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 || peer.uid != ::geteuid())
        throw error(errc::protocol_error, "the process at a worker's reattach point belongs to user " +
                                              std::to_string(peer.uid) + ", not this run's");
      peer_pid_ = peer.pid;
    }
    char greeting[reattach_greeting.size()];
    reattach_challenge theirs{};
    if (!read_all(fd_, greeting, sizeof greeting) || !read_all(fd_, theirs.data(), theirs.size()))
      lost("reading a worker's greeting");
    if (std::string_view(greeting, sizeof greeting) != reattach_greeting)
      throw error(errc::protocol_error, "the process at a worker's reattach point does not speak fiber's reattach");
    auto mine = reattach_random();
    auto proof = reattach_prove(secret, "master", theirs, mine);
    std::string out(reinterpret_cast<const char*>(mine.data()), mine.size());
    out.append(reinterpret_cast<const char*>(proof.data()), proof.size());
    if (!write_all(fd_, out)) lost("proving the secret to a worker");
    reattach_proof answer{};
    std::uint32_t n = 0;
    // A peer that did not know the secret closes here: nothing it sent is read past its greeting.
    if (!read_all(fd_, answer.data(), answer.size())) lost("reading a worker's proof");
    if (!reattach_same(answer, reattach_prove(secret, "worker", mine, theirs)))
      throw error(errc::protocol_error, "the process at a worker's reattach point does not know its secret");
    if (!read_all(fd_, &n, sizeof n)) lost("reading what a worker holds");
    if (n < reattach_seal_bytes)
      throw error(errc::protocol_error, "a worker's reply is shorter than its seal: not fiber's reattach");
    if (n - reattach_seal_bytes > state_limit)
      throw error(errc::protocol_error, "a worker says it holds " + std::to_string(n - reattach_seal_bytes) +
                                            " bytes, more than the " + std::to_string(state_limit) + " it may");
    std::string sealed(n, '\0');
    if (!read_all(fd_, sealed.data(), n)) lost("reading what a worker holds");
    key_ = reattach_key(secret, theirs, mine);
    if (!reattach_unseal(key_, reattach_way::to_master, sealed, state_))
      throw error(errc::protocol_error, "what a worker holds was not sealed in this session (changed on its way?)");
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

reattach_dial::~reattach_dial() { ::close(fd_); }

void reattach_dial::send(const std::string& record) const {
  if (record.size() > reattach_record_limit) throw error(errc::protocol_error, "a reattach record past its bound");
  auto sealed = reattach_seal(key_, reattach_way::to_worker, record);
  auto n = static_cast<std::uint32_t>(sealed.size());
  std::string out(reinterpret_cast<const char*>(&n), sizeof n);
  out += sealed;
  errno = 0;
  if (!write_all(fd_, out)) lost("sending a worker where to link again");
}

}  // namespace fiber::detail
