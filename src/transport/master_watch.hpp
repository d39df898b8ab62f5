// A worker in another machine or container cannot see its master's process die: it watches the
// connection instead. When the connection to the master has been down for `timeout`, the worker
// hears it, and exits (or, in a durable run, waits a bounded time for a master that takes the run
// up), so that no container or pod outlives its master for long.
#pragma once
#include <chrono>
#include <functional>
#include <thread>
#include <zmq.hpp>

namespace fiber::detail {

class master_watch {
 public:
  /// Watches `socket` (the worker's connection to the master; still used by its own thread);
  /// calls `on_lost` on the watch's thread when the connection has been down for `timeout`, or
  /// not up within `timeout` of the start.
  master_watch(zmq::context_t& ctx, zmq::socket_t& socket, std::chrono::milliseconds timeout,
               std::function<void()> on_lost);
  ~master_watch();  // stops watching
  master_watch(const master_watch&) = delete;
  master_watch& operator=(const master_watch&) = delete;

 private:
  void run(std::chrono::milliseconds timeout);
  zmq::socket_t& watched_;
  std::function<void()> on_lost_;
  zmq::socket_t events_;
  std::thread thread_;
};

}  // namespace fiber::detail
