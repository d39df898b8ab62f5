// A child's side of a direct link to its master (the master's: runtime/links/direct_listener;
// what both agree on: runtime/links/direct_wire): on this host an abstract unix socket, the
// master's or its host hub's; across a network TLS over TCP with the job's key. Each connects,
// proves itself with its greeting, and returns the link; each throws fiber::error naming what
// failed (its code the system's: timed_out, permission_denied, connection_refused ...).
#pragma once
#include <asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "runtime/links/direct_wire.hpp"
#include "transport/stream_link.hpp"

namespace fiber::detail {

/// A child's side: connects to `endpoint` (direct_scheme), proves itself as `id` with
/// `password`, and waits up to `patience` for the master's answer: the link's bytes then go through
/// shared memory when the master offers it (runtime/links/lane_handshake). Throws fiber::error
/// when the master cannot be reached or does not answer.
std::shared_ptr<stream_link> connect_direct_link(asio::io_context& io, const std::string& endpoint, const std::string& id,
                                                 const std::string& password, std::chrono::milliseconds patience);
/// A child behind its host's hub (runtime/hubs/host_hub): connects to the abstract unix socket `name`,
/// trying again until `patience` has passed while nothing listens there (the hub may start after
/// the child), and proves itself as `id` with `password`. Throws fiber::error.
std::shared_ptr<stream_link> connect_hub_link(asio::io_context& io, const std::string& name, const std::string& id,
                                              const std::string& password, std::chrono::milliseconds patience);
/// A child on another host: connects to `endpoint` (tls_scheme), trying again until `patience`
/// has passed while nothing listens (a pod's network may come up after its process), proves
/// `psk` in the handshake and itself as `id` (in `role`: a host hub greets as one). TCP is told to give up on a master that takes no
/// bytes for `silence`. Throws fiber::error (its code timed_out: no connection, or no handshake, in
/// time; permission_denied: the master does not hold the key).
std::shared_ptr<stream_link> connect_tls_link(asio::io_context& io, const std::string& endpoint, const std::string& id,
                                              const tls_session::key& psk, std::chrono::milliseconds patience,
                                              std::chrono::milliseconds silence, link_role role = link_role::child);

}  // namespace fiber::detail
