// Shared objects served from worker to worker, so that a large object reaches many hosts while
// leaving the master once: a worker that holds one whole serves it to the workers of other hosts
// the master points to it (transport/shared_frames.hpp, `from_peer`).
//
// The server is a ZeroMQ ROUTER on a thread of its own (a worker's own thread runs the user's
// tasks), listening on the address the master's network reaches, with a CURVE key pair made for
// it: its public key reaches other workers only through their encrypted channel to the master,
// so only the job's workers can complete the handshake. A request is an object's id; the answer
// is the object as transport/shared_frames.hpp writes it, or nothing once it was let go.
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
const shared_server_address& serve_shared_objects();

/// Object `id` from the server at `from` as one object's frames (a description, then the object),
/// or throws fiber::error: worker_lost at once when nothing listens there any more, the link
/// broke or the handshake was refused; timeout when nothing came within `patience` (a stopped
/// server); malformed_message when the server no longer has it.
multipart fetch_shared(const shared_server_address& from, std::uint64_t id, std::chrono::milliseconds patience);

}  // namespace fiber::detail
