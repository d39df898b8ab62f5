#include "transport/master_watch.hpp"

#include <atomic>
#include <cstring>
#include <string>
#include <utility>

#include "core/log.hpp"

namespace fiber::detail {
namespace {
std::atomic<int> next_watch{0};
}  // namespace

master_watch::master_watch(zmq::context_t& ctx, zmq::socket_t& socket, std::chrono::milliseconds timeout,
                           std::function<void()> on_lost)
    : watched_(socket), on_lost_(std::move(on_lost)), events_(ctx, zmq::socket_type::pair) {
  auto address = "inproc://fiber-master-watch-" + std::to_string(next_watch++);
  if (zmq_socket_monitor(socket.handle(), address.c_str(),
                         ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_MONITOR_STOPPED) != 0)
    throw zmq::error_t();
  events_.connect(address);
  thread_ = std::thread([this, timeout] { run(timeout); });
}

master_watch::~master_watch() {
  // Ends the monitor: it sends MONITOR_STOPPED, which ends the thread.
  zmq_socket_monitor(watched_.handle(), nullptr, 0);
  if (thread_.joinable()) thread_.join();
}

void master_watch::run(std::chrono::milliseconds timeout) {
  using clock = std::chrono::steady_clock;
  // Down until the first handshake: a worker whose master is already gone (it started late, or
  // its keys are refused) never sees a disconnect, only connection retries.
  bool down = true;
  auto down_since = clock::now();
  for (;;) {
    long wait_ms = -1;
    if (down) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(down_since + timeout - clock::now());
      if (left.count() <= 0) {
        logf(log_level::error, "lost the connection to the master for ", timeout.count(),
             " ms (heartbeat_timeout_ms): the master is gone");
        on_lost_();
        return;
      }
      wait_ms = left.count();
    }
    zmq::pollitem_t item{events_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      if (zmq::poll(&item, 1, std::chrono::milliseconds(wait_ms)) == 0) continue;
      zmq::message_t event, endpoint;
      if (!events_.recv(event) || !events_.recv(endpoint)) continue;
      std::uint16_t id = 0;
      if (event.size() >= sizeof id) std::memcpy(&id, event.data(), sizeof id);
      if (id == ZMQ_EVENT_MONITOR_STOPPED) return;
      if (id == ZMQ_EVENT_DISCONNECTED && !down) {
        down = true;
        down_since = clock::now();
      }
      if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) down = false;
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
    }
  }
}

}  // namespace fiber::detail
