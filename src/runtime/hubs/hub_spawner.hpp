// In a host hub (hub_workers=fork): starts the children its master places on this host, with a
// backend of the hub's own (the local one: a fork server exec'd once, each child forked from it
// and watched through a pidfd), and tells the master what becomes of each (hub_wire's news).
// The hub's allocation holds the host, so a child's cpu, memory and GPUs were counted by the
// master; here a child is only forked, not pinned.
#pragma once
#include <asio/io_context.hpp>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "backend/backend.hpp"
#include "fiber/detail/unique_function.hpp"
#include "runtime/hubs/hub_wire.hpp"
#include "runtime/nested/spawn_wire.hpp"

namespace fiber::detail {

/// The parts of a hub's news of a child (after its relay frame): the event in decimal, then the
/// news (hub_wire's news).
multipart hub_news(spawn_wire::event e, const spawn_wire::child_news& news);

class hub_spawner {
 public:
  /// `tell(start, parts)`: news of start `start` for the master (its relay frame is the caller's).
  using tell_fn = unique_function<void(const std::string& start, multipart&&)>;
  hub_spawner(asio::io_context& io, std::unique_ptr<backend> children, tell_fn tell);
  /// Kills and reaps every child still running.
  ~hub_spawner();
  hub_spawner(const hub_spawner&) = delete;

  /// The master's start `start`: a child with `spec_text` (spawn_wire::encode). What becomes of
  /// it, including a start that fails, is told.
  void start(const std::string& start, std::string_view spec_text);
  /// The master's signal for start `start` (decimal); a child already ended is not signalled.
  void signal(const std::string& start, std::string_view signal_text);
  std::size_t running() const noexcept { return children_.size(); }

 private:
  void tell(const std::string& start, spawn_wire::event e, const spawn_wire::child_news& news);

  asio::io_context& io_;
  std::unique_ptr<backend> backend_;
  tell_fn tell_;
  std::map<std::string, std::unique_ptr<job>> children_;  // by the master's start number
  std::shared_ptr<int> alive_ = std::make_shared<int>();  // what the loop runs later checks it
};

}  // namespace fiber::detail
