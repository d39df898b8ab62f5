// The master's side of direct links (the child's: runtime/links/direct_connect; what both agree
// on: runtime/links/direct_wire). Direct links between a master and its children on this host
// (docs/design.md, "Direct links on this host"): one unix stream socket per child
// (transport/stream_link) instead of ZeroMQ, so a
// message costs one write and one wake-up each way and no I/O thread runs on either side. The
// master listens on an abstract socket; a child connects and proves itself first with its
// routing id and the job's password, and until then may send only that (a few hundred bytes).
// A child's link closing is how it hears that its master is gone.
//
// Children on other hosts (containers, Slurm nodes, pods) get the same links over TCP with TLS 1.3
// when remote_transport=direct: the TLS handshake proves the job's key, a link whose child has
// been silent for heartbeat_timeout_ms is closed (a child's pulse thread speaks when its task
// does not: runtime/links/link_pulse), and the child hears its master's end from TCP (docs/design.md,
// "Direct links across hosts").
#pragma once
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/local/stream_protocol.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fiber/detail/unique_function.hpp"
#include "runtime/links/direct_wire.hpp"
#include "transport/stream_link.hpp"

namespace fiber::detail {

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
  /// Binds TCP on `host` (an address, or a name that resolves to one; any port) for children on
  /// other hosts, who prove `psk` in a TLS handshake; a link silent for `silence` is closed
  /// (checked every `check_every`). Returns the address bound, "tcp://<host>:<port>"; throws
  /// fiber::error(spawn_failed).
  std::string listen_tcp(const std::string& host, const tls_session::key& psk, std::chrono::milliseconds check_every,
                         std::chrono::milliseconds silence);
  /// Host hubs whose id `expected_hub` accepts may connect (over TLS). A child that joins through
  /// one is reached like any other: its messages come to `on_message` under its id, and send()
  /// goes through its hub. Without this, a hub's greeting is refused.
  void accept_hubs(std::function<bool(const std::string&)> expected_hub) { expected_hub_ = std::move(expected_hub); }
  /// What a master hears of its hubs themselves: a hub's link proven (`linked`) and closed
  /// (`unlinked`), and its news of the children it started (hub_workers=fork: `news(hub, start,
  /// parts)`, the relay frame taken off).
  struct hub_watch {
    unique_function<void(const std::string& hub)> linked, unlinked;
    unique_function<void(const std::string& hub, const std::string& start, multipart&&)> news;
  };
  void watch_hubs(hub_watch w) { hub_watch_ = std::move(w); }
  /// `joined(id)` once child `id` has proven itself, `left(id)` when its link closes, or its hub
  /// says it left (a hub's listener, to tell its master; a master's, to look for the child's end).
  void watch_children(unique_function<void(const std::string&)> joined, unique_function<void(const std::string&)> left) {
    joined_ = std::move(joined);
    left_ = std::move(left);
  }
  /// Up to `most` children on this host that ask get a link through shared memory (the others
  /// stay on their unix socket); 0, the default: none. Before the first child links.
  void offer_lanes(std::size_t most) noexcept { lanes_most_ = most; }
  /// Closes child `id`'s link, if it has one.
  void drop(const std::string& id);
  /// Children linked directly, and through hubs.
  std::size_t linked() const noexcept { return links_.size(); }
  std::size_t linked_through_hubs() const noexcept { return routes_.size(); }
  /// Closes the link of a child silent for `silence` (its pulses stopped: runtime/links/link_pulse),
  /// checked every `check_every`; listen_tcp does so for its children. Before the first child
  /// links.
  void close_silent(std::chrono::milliseconds check_every, std::chrono::milliseconds silence);
  /// What a child connects to.
  const std::string& endpoint() const noexcept { return endpoint_; }
  /// Sends to child `id`; host_unreachable when it has no link (any more), and `parts` is
  /// left as it was on every error.
  std::error_code send(const std::string& id, multipart&& parts);
  void close();

  /// Connections that have not proven themselves may be held at once, at most: a quarter of this
  /// process's descriptor limit, up to 1024. When that many wait, the oldest goes for a new one: a
  /// child proves itself within a turn of the loop, a flood's connections never do.
  static std::size_t max_unproven();
  /// How long a connection may take to prove itself, at most (a child greets as soon as it
  /// connects); one whose bytes are there when its time is up gets one more period.
  static constexpr std::chrono::seconds proof_limit{10};

 private:
  struct pending;  // a connection until it has proven itself
  void accept_next();
  void accept_tcp();
  /// Takes a new connection, or refuses it when too many wait; null when refused.
  std::shared_ptr<pending> admit(stream_link::socket_type s);
  void arm_deadline(const std::shared_ptr<pending>& p, std::chrono::milliseconds limit);
  void handshake(const std::shared_ptr<pending>& p);
  void start_link(const std::shared_ptr<pending>& p);
  /// The child's routing id when it proved itself, else empty (and the link is closed).
  /// Sets `p`'s role, and whether its link went to shared memory.
  std::string on_first_message(const std::shared_ptr<stream_link>& link, multipart&& m, pending& p);
  /// A relay frame and what follows, from hub `hub`.
  void on_hub_message(const std::string& hub, const std::shared_ptr<stream_link>& link, multipart&& m);
  void link_closed(const std::shared_ptr<pending>& p, const std::shared_ptr<stream_link>& link);
  void sweep();

  asio::io_context& io_;
  asio::local::stream_protocol::acceptor acceptor_;
  asio::ip::tcp::acceptor tcp_acceptor_;
  std::optional<tls_session::key> psk_;
  asio::steady_timer sweep_timer_;
  std::chrono::milliseconds check_every_{}, silence_{};
  std::string password_;
  std::size_t max_message_bytes_;
  std::chrono::milliseconds greeting_timeout_;
  std::function<bool(const std::string&)> expected_;
  unique_function<void(const std::string&, multipart&&)> on_message_;
  std::string endpoint_;
  std::unordered_map<std::string, std::shared_ptr<stream_link>> links_;  // by routing id (hubs' too)
  std::unordered_map<std::string, std::shared_ptr<stream_link>> routes_;  // a child behind a hub: the hub's link
  std::function<bool(const std::string&)> expected_hub_;
  unique_function<void(const std::string&)> joined_, left_;
  hub_watch hub_watch_;
  std::vector<std::weak_ptr<pending>> unproven_;
  bool flood_reported_ = false;
  bool closed_ = false;
  std::size_t lanes_most_ = 0, lanes_in_use_ = 0;
};

}  // namespace fiber::detail
