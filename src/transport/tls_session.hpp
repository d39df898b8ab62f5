// TLS 1.3 over a stream fiber reads and writes itself: OpenSSL reads from a memory buffer and
// writes its records into a string the caller takes whole, so the bytes still go through
// stream_link's own system calls (one sendmsg, reads of 64 KiB) and no thread sits between the
// socket and the caller. The peers prove the job's secret with a
// pre-shared key (TLS 1.3 external PSK, with an ephemeral X25519 exchange for forward secrecy):
// no certificates, nothing on disk. Used by the direct links that cross a network
// (docs/design.md, "Across hosts: TLS 1.3 on the same links").
#pragma once
#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace fiber::detail {

class tls_session {
 public:
  enum class role { client, server };
  using key = std::array<unsigned char, 32>;

  /// The pre-shared key for the job whose children hold `secret` (their CURVE secret key).
  static key key_for(std::string_view secret);

  /// Throws fiber::error(protocol_error) when OpenSSL cannot make a session.
  tls_session(role r, const key& psk);
  ~tls_session();
  tls_session(const tls_session&) = delete;
  tls_session& operator=(const tls_session&) = delete;

  /// Bytes that came from the peer.
  void feed(const char* data, std::size_t n);
  /// Appends to `out` the bytes to send the peer, and empties what was waiting.
  void take_output(std::string& out);
  /// Room for `n` more bytes of output, asked before sealing a large message: its records then
  /// go into one buffer without moving.
  void reserve_output(std::size_t n);
  bool has_output() const noexcept;

  enum class step { more, done, failed };
  /// Goes on with the handshake with what was fed (its answers wait in the output); failed: the
  /// peer does not hold the key, or spoke something else (failure() says which).
  step handshake();
  bool established() const noexcept;

  /// Encrypts `n` bytes into the output (after the handshake).
  void seal(const void* data, std::size_t n);
  /// Decrypts into `dst` what was fed: the bytes given (> 0), 0 when more must be fed first,
  /// -1 when the peer closed or sent something that does not decrypt (failure() says which).
  long open(void* dst, std::size_t capacity);
  /// Whether open() failed because the peer ended the session (not a corruption).
  bool closed_by_peer() const noexcept { return closed_by_peer_; }
  /// What went wrong, in OpenSSL's words.
  const std::string& failure() const noexcept { return failure_; }

 private:
  struct state;
  std::unique_ptr<state> s_;
  std::string failure_;
  bool closed_by_peer_ = false;
};

}  // namespace fiber::detail
