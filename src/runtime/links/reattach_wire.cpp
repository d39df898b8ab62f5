#include "runtime/links/reattach_wire.hpp"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

namespace fiber::detail {

reattach_proof reattach_prove(std::string_view secret, std::string_view role, const reattach_challenge& first,
                              const reattach_challenge& second) {
  std::string data(role);
  data.append(reinterpret_cast<const char*>(first.data()), first.size());
  data.append(reinterpret_cast<const char*>(second.data()), second.size());
  reattach_proof out{};
  unsigned int length = 0;
  if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(data.data()),
            data.size(), out.data(), &length) ||
      length != out.size())
    throw std::runtime_error("HMAC-SHA256 failed");
  return out;
}

bool reattach_same(const reattach_proof& a, const reattach_proof& b) noexcept {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

reattach_challenge reattach_random() {
  reattach_challenge c{};
  if (RAND_bytes(c.data(), static_cast<int>(c.size())) != 1) throw std::runtime_error("no random bytes for a challenge");
  return c;
}

bool read_all(int fd, void* to, std::size_t n) noexcept {
  auto* p = static_cast<char*>(to);
  while (n) {
    auto got = ::recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

bool write_all(int fd, std::string_view bytes) noexcept {
  while (!bytes.empty()) {
    auto put = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(put));
  }
  return true;
}

}  // namespace fiber::detail
