// A host hub: one process on a host whose children reach it over unix sockets, as they would a
// master on their host, and that carries their messages to the master over one TLS link
// (runtime/hubs/hub_wire; docs/design.md, "Host hubs"). The master then keeps one TCP stream per host,
// not one per child, and what one turn of a loop sends for a host costs one write and one
// encryption: at 1,024 children on two hosts the master's CPU per task falls from a TCP send and
// receive per task to a share of one (docs/performance-log.md).
//
// The hub proves nothing for a child: it checks the job's password as a master does, and asks
// the master whether it expects that child (joined); the master refuses the ones it does not. A
// child's link closing is told to the master (left); the master's link closing closes every
// child's link, which is how a child behind a hub hears that its master is gone.
#pragma once
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "fiber/detail/unique_function.hpp"
#include "runtime/links/direct_listener.hpp"
#include "runtime/links/direct_connect.hpp"
#include "runtime/hubs/hub_spawner.hpp"
#include "runtime/hubs/hub_wire.hpp"
#include "transport/stream_link.hpp"

namespace fiber::detail {

class host_hub : public std::enable_shared_from_this<host_hub> {
 public:
  /// `upstream`: a link to the master that greeted as a hub (connect_tls_link, link_role::hub).
  /// Children prove `password` within `greeting_timeout`; their messages may total
  /// `max_message_bytes`.
  /// `children`: the backend the hub forks its host's children with when its master asks
  /// (hub_workers=fork, runtime/hubs/hub_spawner), made on the first ask; none: it refuses them.
  host_hub(asio::io_context& io, std::shared_ptr<stream_link> upstream, std::string password,
           std::size_t max_message_bytes, std::chrono::milliseconds greeting_timeout,
           unique_function<std::unique_ptr<backend>()> children = {});

  /// Listens for this host's children on the abstract unix socket `name` and relays until the
  /// master's link closes; then closes every child's link and calls `on_end`. Says it is alive to
  /// the master when it sent nothing else for `interval`, and closes the link of a child silent
  /// for `silence` (a stopped one: the master learns it left). Throws
  /// fiber::error(spawn_failed) when it cannot listen.
  void start(const std::string& name, unique_function<void()> on_end, std::chrono::milliseconds interval,
             std::chrono::milliseconds silence);
  /// What a child connects to (direct_scheme).
  const std::string& endpoint() const noexcept { return children_->endpoint(); }
  std::size_t children() const noexcept { return children_->linked(); }
  /// Children this hub started and that still run.
  std::size_t started() const noexcept { return spawner_ ? spawner_->running() : 0; }
  void close();

 private:
  void to_master(hub_wire::op o, const std::string& id, multipart&& parts);
  void from_master(multipart&& m);
  void end();
  void pulse();
  void start_child(const std::string& start, multipart&& m);

  asio::io_context& io_;
  std::shared_ptr<stream_link> upstream_;
  std::shared_ptr<direct_listener> children_;
  unique_function<std::unique_ptr<backend>()> make_spawner_backend_;
  std::unique_ptr<hub_spawner> spawner_;
  unique_function<void()> on_end_;
  asio::steady_timer pulse_timer_;
  std::chrono::milliseconds interval_{};
  bool ended_ = false;
};

}  // namespace fiber::detail
