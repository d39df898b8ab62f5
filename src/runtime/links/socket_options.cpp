#include "runtime/links/socket_options.hpp"

#include <algorithm>

#include "transport/zmq_channel.hpp"

namespace fiber::detail {

void configure_socket(zmq::socket_t& s, const fiber::config& cfg, bool heartbeats) {
  s.set(zmq::sockopt::sndhwm, 0);  // queues are unbounded, like multiprocessing's
  s.set(zmq::sockopt::rcvhwm, 0);
  s.set(zmq::sockopt::linger, 0);
  if (heartbeats) {
    s.set(zmq::sockopt::heartbeat_ivl, cfg.heartbeat_interval_ms);
    s.set(zmq::sockopt::heartbeat_timeout, cfg.heartbeat_timeout_ms);
    s.set(zmq::sockopt::heartbeat_ttl, std::min(cfg.heartbeat_timeout_ms, 6553599));
  }
  // No frame fiber sends is larger (zmq_channel splits larger parts), and the limit holds before
  // a peer has authenticated too: a stranger cannot make this side hold more per connection.
  // max_message_bytes is checked on the joined message (zmq_channel::limit_joined_messages).
  s.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(max_frame_bytes + 4096));
}

}  // namespace fiber::detail
