// The options every fiber socket gets, from the job's config.
#pragma once
#include <zmq.hpp>

#include "fiber/config.hpp"

namespace fiber::detail {

/// Unbounded queues (like multiprocessing's), no linger, heartbeats, and the size limit.
void configure_socket(zmq::socket_t& s, const fiber::config& cfg);

}  // namespace fiber::detail
