#include "transport/tls_session.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include <climits>
#include <cstring>
#include <new>

#include "fiber/error.hpp"

namespace fiber::detail {

namespace {
// The PSK's name on the wire (the key itself never travels).
constexpr std::string_view psk_identity = "fiber job";
// TLS_AES_128_GCM_SHA256: AES runs in hardware on every x86-64 and arm64 server; the PSK is
// bound to this suite's hash, SHA-256.
constexpr unsigned char suite_id[2] = {0x13, 0x01};

std::string openssl_error(std::string_view what) {
  std::string text(what);
  char buf[256];
  while (unsigned long e = ERR_get_error()) {
    ERR_error_string_n(e, buf, sizeof buf);
    text += ": ";
    text += buf;
  }
  return text;
}

/// OpenSSL frees its globals in an exit handler, registered when it is first used (by libcurl
/// too, often before a master listens); a master's links, held by the default context, are freed
/// after that handler ran, in the destructors of statics made before it: a freed session there
/// crashed a master at exit now and then (exit code 139). Asked before main() runs, OpenSSL
/// registers no exit handler, and its globals last as long as the process. Only the crypto
/// library's base is set up here (the first call decides the handler for both libraries): the
/// TLS library's tables, 1 ms of every process image's start, wait for a process that uses them.
[[maybe_unused]] const bool openssl_without_exit_handler = OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr) == 1;

/// One context for every session of the process: TLS 1.3 only, one suite, no tickets (a link is
/// never resumed), no certificates (the PSK proves both ends).
SSL_CTX* shared_context() {
  static SSL_CTX* ctx = [] {
    SSL_CTX* c = SSL_CTX_new(TLS_method());
    if (!c) throw error(errc::protocol_error, openssl_error("cannot make a TLS context"));
    SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(c, TLS1_3_VERSION);
    SSL_CTX_set_ciphersuites(c, "TLS_AES_128_GCM_SHA256");
    SSL_CTX_set_num_tickets(c, 0);
    SSL_CTX_set_options(c, SSL_OP_NO_TICKET);
    // A write is all or nothing into the memory buffer; records of 16 KiB at most.
    SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    return c;
  }();
  return ctx;
}

SSL_SESSION* psk_session(SSL* ssl, const tls_session::key& psk) {
  const SSL_CIPHER* cipher = SSL_CIPHER_find(ssl, suite_id);
  if (!cipher) return nullptr;
  SSL_SESSION* s = SSL_SESSION_new();
  if (!s) return nullptr;
  if (!SSL_SESSION_set1_master_key(s, psk.data(), psk.size()) || !SSL_SESSION_set_cipher(s, cipher) ||
      !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
    SSL_SESSION_free(s);
    return nullptr;
  }
  return s;
}
}  // namespace

struct tls_session::state {
  SSL* ssl = nullptr;
  BIO* in = nullptr;   // what the peer sent, for OpenSSL to read
  BIO* out = nullptr;  // appends what OpenSSL writes to `sent`
  std::string sent;    // what the caller is to send, records whole
  key psk{};
  ~state() {
    if (ssl) SSL_free(ssl);  // frees both buffers too
  }
};

namespace {
/// The output side: each record OpenSSL writes is appended to the session's own string, which the
/// caller takes whole (swapped, not copied, when it has nothing yet). OpenSSL's memory buffer would
/// cost a message three more passes over its bytes: zeroing as it grows, the copy in, and
/// the copy out (with its zeroing) into the string the caller sends.
int sink_write(BIO* b, const char* data, std::size_t n, std::size_t* written) {
  try {
    static_cast<std::string*>(BIO_get_data(b))->append(data, n);
  } catch (const std::bad_alloc&) {
    return 0;  // not through OpenSSL's frames: its write fails, and seal() says so
  }
  *written = n;
  return 1;
}
long sink_ctrl(BIO*, int cmd, long, void*) {
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;  // nothing is held back: a flush is done at once
}
int sink_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}
const BIO_METHOD* sink_method() {
  static BIO_METHOD* m = [] {
    BIO_METHOD* made = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "fiber tls output");
    if (!made || !BIO_meth_set_write_ex(made, sink_write) || !BIO_meth_set_ctrl(made, sink_ctrl) ||
        !BIO_meth_set_create(made, sink_create))
      throw error(errc::protocol_error, openssl_error("cannot make the TLS output's BIO method"));
    return made;
  }();
  return m;
}

int app_index() {
  static int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}
const tls_session::key& key_of(SSL* ssl) { return *static_cast<const tls_session::key*>(SSL_get_ex_data(ssl, app_index())); }

int use_psk(SSL* ssl, const EVP_MD* md, const unsigned char** id, std::size_t* id_len, SSL_SESSION** sess) {
  SSL_SESSION* s = psk_session(ssl, key_of(ssl));
  if (!s) return 0;
  if (md && md != SSL_CIPHER_get_handshake_digest(SSL_SESSION_get0_cipher(s))) {
    SSL_SESSION_free(s);  // a suite this PSK is not for: offer none
    *sess = nullptr;
    return 1;
  }
  *id = reinterpret_cast<const unsigned char*>(psk_identity.data());
  *id_len = psk_identity.size();
  *sess = s;
  return 1;
}

int find_psk(SSL* ssl, const unsigned char* id, std::size_t id_len, SSL_SESSION** sess) {
  if (std::string_view(reinterpret_cast<const char*>(id), id_len) != psk_identity) {
    *sess = nullptr;  // unknown: the handshake fails (there is no certificate to fall back on)
    return 1;
  }
  *sess = psk_session(ssl, key_of(ssl));
  return *sess ? 1 : 0;
}
}  // namespace

tls_session::key tls_session::key_for(std::string_view secret) {
  // A key of its own for this use, not the CURVE key itself.
  constexpr std::string_view label = "fiber direct link over TLS 1.3\n";
  key k{};
  unsigned int n = 0;
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  bool ok = md && EVP_DigestInit_ex(md, EVP_sha256(), nullptr) && EVP_DigestUpdate(md, label.data(), label.size()) &&
            EVP_DigestUpdate(md, secret.data(), secret.size()) && EVP_DigestFinal_ex(md, k.data(), &n) && n == k.size();
  EVP_MD_CTX_free(md);
  if (!ok) throw error(errc::protocol_error, openssl_error("cannot derive the link's key"));
  return k;
}

tls_session::tls_session(role r, const key& psk) : s_(std::make_unique<state>()) {
  s_->psk = psk;
  s_->ssl = SSL_new(shared_context());
  s_->in = BIO_new(BIO_s_mem());
  s_->out = BIO_new(sink_method());
  if (s_->out) BIO_set_data(s_->out, &s_->sent);
  if (!s_->ssl || !s_->in || !s_->out) {
    BIO_free(s_->in);  // not the session's yet (SSL_set_bio hands them over)
    BIO_free(s_->out);
    throw error(errc::protocol_error, openssl_error("cannot make a TLS session"));
  }
  BIO_set_mem_eof_return(s_->in, -1);  // empty means "more to come", not the end
  SSL_set_bio(s_->ssl, s_->in, s_->out);
  SSL_set_ex_data(s_->ssl, app_index(), &s_->psk);
  if (r == role::client) {
    SSL_set_psk_use_session_callback(s_->ssl, use_psk);
    SSL_set_connect_state(s_->ssl);
  } else {
    SSL_set_psk_find_session_callback(s_->ssl, find_psk);
    SSL_set_accept_state(s_->ssl);
  }
}

tls_session::~tls_session() = default;

void tls_session::feed(const char* data, std::size_t n) {
  while (n > 0) {
    int chunk = static_cast<int>(std::min<std::size_t>(n, INT_MAX));
    int w = BIO_write(s_->in, data, chunk);
    if (w <= 0) throw std::bad_alloc();
    data += w;
    n -= static_cast<std::size_t>(w);
  }
}

bool tls_session::has_output() const noexcept { return !s_->sent.empty(); }

void tls_session::reserve_output(std::size_t n) { s_->sent.reserve(s_->sent.size() + n); }

void tls_session::take_output(std::string& out) {
  if (out.empty())
    out.swap(s_->sent);
  else
    out.append(s_->sent);
  s_->sent.clear();
}

tls_session::step tls_session::handshake() {
  ERR_clear_error();
  int r = SSL_do_handshake(s_->ssl);
  if (r == 1) return step::done;
  int e = SSL_get_error(s_->ssl, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return step::more;
  failure_ = openssl_error("TLS handshake failed (the peer does not hold this job's key, or is not a fiber link)");
  return step::failed;
}

bool tls_session::established() const noexcept { return SSL_is_init_finished(s_->ssl); }

void tls_session::seal(const void* data, std::size_t n) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    std::size_t written = 0;
    if (SSL_write_ex(s_->ssl, p, n, &written) != 1 || written == 0)
      throw error(errc::protocol_error, openssl_error("cannot encrypt for a TLS link"));
    p += written;
    n -= written;
  }
}

long tls_session::open(void* dst, std::size_t capacity) {
  if (capacity == 0) return 0;
  ERR_clear_error();
  std::size_t got = 0;
  if (SSL_read_ex(s_->ssl, dst, capacity, &got) == 1) return static_cast<long>(got);
  int e = SSL_get_error(s_->ssl, 0);
  if (e == SSL_ERROR_WANT_READ) return 0;
  closed_by_peer_ = e == SSL_ERROR_ZERO_RETURN;
  failure_ = e == SSL_ERROR_ZERO_RETURN ? std::string("the peer closed the TLS link")
                                         : openssl_error("a TLS link's bytes do not decrypt");
  return -1;
}

}  // namespace fiber::detail
