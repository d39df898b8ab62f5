// A nested master's pool on the run's dashboard: the page is the top master's, so this pool's
// state is sent up every dashboard_interval_ms, once more when it is terminated, and, marked
// ended, when it goes. Idle where nothing above shows pools (start() is not called). On fiber's
// loop thread, but for the last word, which the pool's destructor may say from any thread.
#pragma once
#include <boost/json/object.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

namespace fiber::detail {

class pool_upstream {
 public:
  using describe_fn = std::function<boost::json::object()>;
  /// Sends a state (JSON text) up; `ended` once, with the last.
  using send_fn = std::function<void(std::string_view state, bool ended)>;

  pool_upstream(asio::io_context& io, std::chrono::milliseconds interval, send_fn send)
      : io_(io), interval_(interval), send_(std::move(send)) {}
  /// Its last state, marked ended, once it was started: describe() may not run here (off the
  /// loop, in a pool going away).
  ~pool_upstream();

  /// Sends `describe()` now and every interval while `owner` lives.
  void start(std::weak_ptr<void> owner, describe_fn describe);
  /// Sends the state now, once started.
  void show();

 private:
  void every();

  asio::io_context& io_;
  std::chrono::milliseconds interval_;
  send_fn send_;
  std::weak_ptr<void> owner_;
  describe_fn describe_;
  std::unique_ptr<asio::steady_timer> timer_;
  std::string last_;
};

}  // namespace fiber::detail
