#include "primitives/ring/sealed_link.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace fiber::detail {
namespace {
// Plaintext sealed per call: enough to keep the socket busy, little enough to bound what waits.
constexpr std::size_t seal_at_most = 256 << 10;
constexpr std::size_t read_at_most = 256 << 10;
}  // namespace

sealed_link::sealed_link(int fd, tls_session::role r, const tls_session::key& psk) : fd_(fd), s_(r, psk), in_(read_at_most) {}

sealed_link::~sealed_link() = default;

tls_session::key sealed_link::key_for_ring(const std::string& secret) {
  // Not the job's link key: the ring's own, from a secret only its members hold.
  return tls_session::key_for("fiber ring link\n" + secret);
}

bool sealed_link::flush() {
  while (out_at_ < out_.size()) {
    auto w = ::send(fd_, out_.data() + out_at_, out_.size() - out_at_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      out_at_ += static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    why_ = std::string("cannot send: ") + std::strerror(errno);
    return false;
  }
  out_.clear();
  out_at_ = 0;
  return true;
}

int sealed_link::pull() {
  for (;;) {
    auto r = ::recv(fd_, in_.data(), in_.size(), MSG_DONTWAIT);
    if (r > 0) {
      s_.feed(in_.data(), static_cast<std::size_t>(r));
      return 1;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    why_ = r == 0 ? std::string("the peer closed the link") : std::string("cannot receive: ") + std::strerror(errno);
    return -1;
  }
}

tls_session::step sealed_link::handshake() {
  for (;;) {
    auto step = s_.handshake();
    s_.take_output(out_);
    if (!flush()) return tls_session::step::failed;
    if (step == tls_session::step::failed) {
      why_ = s_.failure();
      return step;
    }
    if (step == tls_session::step::done) return step;
    // More: what the peer sent may already be here.
    auto got = pull();
    if (got == 0) return tls_session::step::more;
    if (got < 0) return tls_session::step::failed;
  }
}

long sealed_link::send_some(const void* data, std::size_t n) {
  if (!flush()) return -1;
  if (has_output()) return 0;
  auto take = std::min(n, seal_at_most);
  s_.seal(data, take);
  s_.take_output(out_);
  if (!flush()) return -1;
  return static_cast<long>(take);
}

long sealed_link::recv_some(void* dst, std::size_t n) {
  for (;;) {
    auto r = s_.open(dst, n);  // what was fed and not yet opened comes first
    if (r != 0) {
      if (r < 0) why_ = s_.failure();
      return r;
    }
    auto got = pull();
    if (got <= 0) return got;
  }
}

short sealed_link::wanted_events() const noexcept { return static_cast<short>(POLLIN | (has_output() ? POLLOUT : 0)); }

}  // namespace fiber::detail
