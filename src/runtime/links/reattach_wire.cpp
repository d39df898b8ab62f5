#include "runtime/links/reattach_wire.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
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

reattach_proof reattach_key(std::string_view secret, const reattach_challenge& workers, const reattach_challenge& masters) {
  return reattach_prove(secret, "key", workers, masters);
}

namespace {
/// GCM's nonce for `way`: unique under a key that seals once each way.
std::array<unsigned char, 12> nonce_of(reattach_way way) {
  std::array<unsigned char, 12> n{};
  n[0] = static_cast<unsigned char>(way);
  return n;
}
struct cipher_context {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  ~cipher_context() { EVP_CIPHER_CTX_free(ctx); }
};
}  // namespace

std::string reattach_seal(const reattach_proof& key, reattach_way way, std::string_view text) {
  cipher_context c;
  auto nonce = nonce_of(way);
  std::string out(text.size() + reattach_seal_bytes, '\0');
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  int n = 0, last = 0;
  if (!c.ctx || EVP_EncryptInit_ex(c.ctx, EVP_aes_256_gcm(), nullptr, key.data(), nonce.data()) != 1 ||
      EVP_EncryptUpdate(c.ctx, o, &n, reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size())) != 1 ||
      EVP_EncryptFinal_ex(c.ctx, o + n, &last) != 1 ||
      EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_GET_TAG, static_cast<int>(reattach_seal_bytes), o + text.size()) != 1)
    throw std::runtime_error("AES-256-GCM sealing failed");
  return out;
}

bool reattach_unseal(const reattach_proof& key, reattach_way way, std::string_view sealed, std::string& text) {
  if (sealed.size() < reattach_seal_bytes) return false;
  cipher_context c;
  auto nonce = nonce_of(way);
  auto length = sealed.size() - reattach_seal_bytes;
  text.assign(length, '\0');
  std::array<unsigned char, reattach_seal_bytes> tag{};
  std::memcpy(tag.data(), sealed.data() + length, tag.size());
  int n = 0, last = 0;
  bool ok = c.ctx && EVP_DecryptInit_ex(c.ctx, EVP_aes_256_gcm(), nullptr, key.data(), nonce.data()) == 1 &&
            EVP_DecryptUpdate(c.ctx, reinterpret_cast<unsigned char*>(text.data()), &n,
                              reinterpret_cast<const unsigned char*>(sealed.data()), static_cast<int>(length)) == 1 &&
            EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_SET_TAG, static_cast<int>(tag.size()), tag.data()) == 1 &&
            EVP_DecryptFinal_ex(c.ctx, reinterpret_cast<unsigned char*>(text.data()) + n, &last) == 1;
  if (!ok) text.clear();
  return ok;
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
