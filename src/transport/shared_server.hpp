// Shared objects served from worker to worker, so that a large object reaches many hosts while
// leaving the master once: a worker that holds one whole serves it to the workers of other hosts
// the master points to it (transport/shared_frames.hpp, `from_peer`).
//
// The server is a ZeroMQ ROUTER on a thread of its own (a worker's own thread runs the user's
// tasks), listening on the address the master's network reaches, with a CURVE key pair made for
// it: its public key reaches other workers only through their encrypted channel to the master.
// Its ZAP handler admits only clients that hold the job's client key pair (which every worker of
// the job has, from its credentials), and a request is at most 64 bytes (ZeroMQ drops a peer that
// sends more before anything is allocated for it). A request is an object's id; the answer is the
// object as transport/shared_frames.hpp writes it, or nothing once it was let go.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

#include "transport/zmq_channel.hpp"

namespace fiber::detail {

/// This process's server (started on first use): where it listens and its public key.
struct shared_server_address {
  std::string endpoint, public_key;
};
/// A CURVE key pair, Z85.
struct curve_pair {
  std::string public_key, secret_key;
};
/// Starts the server on first use, admitting only clients with the public key `admitted` (the
/// job's client key); fiber::error(protocol_error) when asked again for another key.
const shared_server_address& serve_shared_objects(const std::string& admitted);

/// Object `id` from the server at `from` as one object's frames (a description, then the object),
/// or throws fiber::error: worker_lost at once when nothing listens there any more, the link
/// broke or the handshake was refused; timeout when nothing came within `patience` (a stopped
/// server); malformed_message when the server no longer has it.
/// `client`: the job's client key pair, which the server admits.
multipart fetch_shared(const shared_server_address& from, std::uint64_t id, std::chrono::milliseconds patience,
                       const curve_pair& client);

}  // namespace fiber::detail
