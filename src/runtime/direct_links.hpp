// Direct links between a master and its children on this host (docs/design.md, "Direct
// links"): one unix stream socket per child (transport/stream_link) instead of ZeroMQ, so a
// message costs one write and one wake-up each way and no I/O thread runs on either side. The
// master listens on an abstract socket; a child connects and proves itself first with its
// routing id and the job's password, and until then may send only that (a few hundred bytes).
// A child's link closing is how it hears that its master is gone.
#pragma once
#include <asio/io_context.hpp>
#include <asio/local/stream_protocol.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "fiber/detail/unique_function.hpp"
#include "transport/stream_link.hpp"

namespace fiber::detail {

/// The endpoint scheme children see for a master's direct links: "unix:@<abstract name>".
inline constexpr std::string_view direct_scheme = "unix:@";

/// The master's side: accepts children's links and routes their messages by routing id.
class direct_listener : public std::enable_shared_from_this<direct_listener> {
 public:
  /// `expected(id)`: whether a child with routing id `id` may connect now. `on_message(id, m)`:
  /// a message from child `id`, header first. Links take messages of up to
  /// `max_message_bytes` once proven; a connection that has not proven itself within
  /// `greeting_timeout` is closed.
  direct_listener(asio::io_context& io, std::string password, std::size_t max_message_bytes,
                  std::chrono::milliseconds greeting_timeout,
                  std::function<bool(const std::string&)> expected,
                  unique_function<void(const std::string&, multipart&&)> on_message);

  /// Binds `name` (abstract) and starts accepting; throws fiber::error(spawn_failed).
  void listen(const std::string& name);
  /// What a child connects to.
  const std::string& endpoint() const noexcept { return endpoint_; }
  /// Sends to child `id`; host_unreachable when it has no link (any more), and `parts` is
  /// left as it was on every error.
  std::error_code send(const std::string& id, multipart&& parts);
  void close();

  /// Connections that have not proven themselves yet may be held at once; more are refused.
  static constexpr std::size_t max_unproven = 1024;

 private:
  void accept_next();
  void on_connection(asio::local::stream_protocol::socket s);
  /// The child's routing id when it proved itself, else empty (and the link is closed).
  std::string on_first_message(const std::shared_ptr<stream_link>& link, multipart&& m);

  asio::local::stream_protocol::acceptor acceptor_;
  std::string password_;
  std::size_t max_message_bytes_;
  std::chrono::milliseconds greeting_timeout_;
  std::function<bool(const std::string&)> expected_;
  unique_function<void(const std::string&, multipart&&)> on_message_;
  std::string endpoint_;
  std::unordered_map<std::string, std::shared_ptr<stream_link>> links_;  // by routing id
  std::vector<std::weak_ptr<stream_link>> unproven_;
  bool closed_ = false;
};

/// A child's side: connects to `endpoint` (direct_scheme) and proves itself as `id` with
/// `password`. Throws std::system_error when the master cannot be reached.
std::shared_ptr<stream_link> connect_direct_link(asio::io_context& io, const std::string& endpoint, const std::string& id,
                                                 const std::string& password);

}  // namespace fiber::detail
