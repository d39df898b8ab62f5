#include "runtime/links/reattach_dial.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <system_error>

#include "fiber/error.hpp"
#include "runtime/links/reattach_wire.hpp"

namespace fiber::detail {
namespace {
[[noreturn]] void lost(const char* what) {
  throw std::system_error(errno ? errno : ECONNRESET, std::generic_category(), what);
}
}  // namespace

reattach_dial::reattach_dial(const std::string& name, const std::string& secret, std::chrono::milliseconds patience,
                             std::size_t state_limit) {
  sockaddr_un addr{};
  if (name.size() + 1 > sizeof addr.sun_path)
    throw error(errc::protocol_error, "a reattach point's name is longer than a unix socket's");
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) lost("a socket to dial a worker");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  auto ms = patience.count();
  timeval wait{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>(ms % 1000 * 1000)};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof wait);
  try {
    errno = 0;
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), length) != 0) lost("dialling a worker's reattach point");
    ucred peer{};
    socklen_t size = sizeof peer;
    if (::getsockopt(fd_, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 || peer.uid != ::geteuid())
      throw error(errc::protocol_error, "the process at a worker's reattach point belongs to user " +
                                            std::to_string(peer.uid) + ", not this run's");
    peer_pid_ = peer.pid;
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
    if (n > state_limit)
      throw error(errc::protocol_error, "a worker says it holds " + std::to_string(n) + " bytes, more than the " +
                                            std::to_string(state_limit) + " it may");
    state_.resize(n);
    if (!read_all(fd_, state_.data(), n)) lost("reading what a worker holds");
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

reattach_dial::~reattach_dial() { ::close(fd_); }

void reattach_dial::send(const std::string& record) const {
  if (record.size() > reattach_record_limit) throw error(errc::protocol_error, "a reattach record past its bound");
  auto n = static_cast<std::uint32_t>(record.size());
  std::string out(reinterpret_cast<const char*>(&n), sizeof n);
  out += record;
  errno = 0;
  if (!write_all(fd_, out)) lost("sending a worker where to link again");
}

}  // namespace fiber::detail
