// What peers talk to by id (a channel id): at the master a pool or a manager, in a worker the
// caller's side of a manager. The runtime routes service messages here without reading them.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "runtime/protocol.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {

class service {
 public:
  virtual ~service() = default;
  /// A message for this service (a kind from its own wire, or kind::service_gone); on the loop.
  virtual void on_message(const std::string& peer, const header& h, multipart&& payload) = 0;
  /// The runtime is shutting down: cancel timers, so that a caller's io_context runs out of work.
  virtual void on_shutdown() noexcept {}
  /// Whether children's messages on this id are this service's (a manager, a pool); a worker's
  /// client of a service above is not, and a nested master passes its children's calls up.
  virtual bool serves_children() const noexcept { return true; }
  /// Child `peer` of this process's master side is gone (it ended, or was let go).
  virtual void on_peer_gone(const std::string& /*peer*/) noexcept {}
};

class service_registry {
 public:
  void add(std::uint64_t id, std::weak_ptr<service> s) { services_[id] = std::move(s); }
  void remove(std::uint64_t id) { services_.erase(id); }
  /// The service `id` this registry keeps (a worker's client of a master's service: it lives as
  /// long as the runtime), made by `make` on first use.
  template <class S, class Make>
  S& keep(std::uint64_t id, Make make) {
    auto& kept = kept_[id];
    if (!kept) {
      kept = make();
      services_[id] = kept;
    }
    return static_cast<S&>(*kept);
  }
  std::shared_ptr<service> find(std::uint64_t id) const {
    auto it = services_.find(id);
    return it == services_.end() ? nullptr : it->second.lock();
  }
  void peer_gone(const std::string& peer) noexcept {
    for (auto& [id, weak] : services_)
      if (auto s = weak.lock()) s->on_peer_gone(peer);
  }
  void shutdown_all() noexcept {
    for (auto& [id, weak] : services_)
      if (auto s = weak.lock()) s->on_shutdown();
  }

 private:
  std::unordered_map<std::uint64_t, std::weak_ptr<service>> services_;
  std::unordered_map<std::uint64_t, std::shared_ptr<service>> kept_;
};

}  // namespace fiber::detail
