// A job's secrets and who may connect. CURVE keys (Z85) for channels that cross a network; a
// password for local unix sockets, which the kernel keeps private, so they need authentication,
// not encryption. The master's ZAP handler lets in only peers holding this job's client key or
// password (docs/design.md, "Security").
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <zmq.hpp>

#include "transport/zmq_channel.hpp"

namespace fiber::detail {

struct job_keys {
  std::string server_public, server_secret, client_public, client_secret;
  std::string password;
  bool plain = false;  // worker: connect with PLAIN (password) rather than CURVE
  static job_keys generate();
  /// What a worker gets through its environment: "plain,<password>" or
  /// "curve,<server public>,<client public>,<client secret>" (Z85 has no comma).
  std::string for_worker(bool plain) const;
  /// Throws fiber::error(protocol_error) on malformed text.
  static job_keys from_worker_text(std::string_view text);
};

/// The master's socket: PLAIN (password) or CURVE server, checked by the job's ZAP handler.
void secure_as_server(zmq::socket_t& s, const job_keys& keys, bool plain);
/// A worker's socket to its master, with the credentials it was given.
void secure_as_client(zmq::socket_t& s, const job_keys& keys);

/// Answers ZeroMQ's authentication requests for this process's listening sockets (one per
/// ZeroMQ context): only `keys`' client key (CURVE) or password (PLAIN) may in.
class zap_handler : public std::enable_shared_from_this<zap_handler> {
 public:
  zap_handler(asio::io_context& io, zmq::context_t& ctx, const job_keys& keys, bool plain);
  /// Starts answering; call once, after construction.
  void start();
  void close();

 private:
  void step();
  bool allowed(const multipart& request) const;
  std::shared_ptr<zmq_channel> socket_;
  const job_keys& keys_;
  bool plain_;
};

}  // namespace fiber::detail
