// The options every fiber socket gets, from the job's config.
#pragma once
#include <zmq.hpp>

#include "fiber/config.hpp"

namespace fiber::detail {

/// Unbounded queues (like multiprocessing's), no linger, the frame size limit, and ZeroMQ heartbeats
/// when `heartbeats` (each costs a wake-up per peer per heartbeat_interval_ms on both sides).
void configure_socket(zmq::socket_t& s, const fiber::config& cfg, bool heartbeats = true);

}  // namespace fiber::detail
