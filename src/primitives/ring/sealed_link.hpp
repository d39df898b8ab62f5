// A ring link across hosts: TLS 1.3 (transport/tls_session: a pre-shared key derived from the
// ring's secret, an ephemeral X25519 exchange) over a non-blocking TCP socket, driven by the
// mesh's own loop. Nothing here blocks or waits: the mesh polls the socket for wanted_events()
// and calls again. The ring's secret never crosses the wire; bytes that do not decrypt end the link.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "transport/tls_session.hpp"

namespace fiber::detail {

class sealed_link {
 public:
  /// Over `fd` (non-blocking; its owner closes it).
  sealed_link(int fd, tls_session::role r, const tls_session::key& psk);
  ~sealed_link();
  sealed_link(const sealed_link&) = delete;
  sealed_link& operator=(const sealed_link&) = delete;

  /// The key of ring links for the ring whose members hold `secret`.
  static tls_session::key key_for_ring(const std::string& secret);

  int fd() const noexcept { return fd_; }
  /// Goes on with the handshake with what the socket holds: done once established; failed when
  /// the peer does not hold the key, spoke something else, or hung up (why()).
  tls_session::step handshake();
  bool handshake_done() const noexcept { return s_.established(); }
  /// Takes up to `n` bytes of `data`, encrypted into what waits to be sent, and sends what the
  /// socket takes: the bytes taken (0 while earlier ones still wait), -1 when the socket broke.
  long send_some(const void* data, std::size_t n);
  /// Sends what waits; false when the socket broke.
  bool flush();
  bool has_output() const noexcept { return out_at_ < out_.size(); }
  /// Decrypted bytes into `dst`: how many (> 0), 0 when none have arrived yet, -1 when the peer
  /// closed the link or sent bytes that do not decrypt (why()).
  long recv_some(void* dst, std::size_t n);
  /// What to poll the socket for now.
  short wanted_events() const noexcept;
  const std::string& why() const noexcept { return why_; }

 private:
  /// Reads what the socket holds into the session: 1 some, 0 none yet, -1 at its end or on an
  /// error (why()).
  int pull();
  int fd_;
  tls_session s_;
  std::string out_;
  std::size_t out_at_ = 0;
  std::vector<char> in_;
  std::string why_;
};

}  // namespace fiber::detail
