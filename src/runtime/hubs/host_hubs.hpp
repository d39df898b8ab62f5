// A master's host hubs (remote_transport=hub; runtime/hubs/host_hub, docs/design.md "Host hubs"): one
// per host its backend may place children on, started through the backend like a child and
// linked back over TLS. Each host's children link to its hub, by a unix name the master hands
// them (env_hub). A hub that ends while the master runs is started again, a few times.
#pragma once
#include <asio/io_context.hpp>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "fiber/config.hpp"

namespace fiber::detail {

class host_hubs {
 public:
  /// `endpoint`: where hubs reach the master (tls_scheme); `credentials`: a child's keys.
  /// With cfg.hub_workers=fork, each hub takes its host whole and forks the children placed there
  /// (runtime/hubs/hub_forks).
  host_hubs(asio::io_context& io, backend& b, const fiber::config& cfg, std::string job_id, std::string endpoint,
            std::string credentials);
  ~host_hubs();
  host_hubs(const host_hubs&) = delete;

  /// Starts a hub on each of `hosts`; throws fiber::error(spawn_failed) when the backend cannot.
  void start(const std::vector<hub_host>& hosts);
  /// Whether `id` is a hub this master started (the listener's check of a hub's greeting).
  bool expected(const std::string& id) const { return ids_.contains(id); }
  /// The host of hub `id`; empty when it is none of this master's.
  std::string host_of(const std::string& id) const;
  /// Calls `f(host, why)` when this master gives up on `host`'s hub (it ended too often).
  void on_given_up(unique_function<void(const std::string&, const std::string&)> f) { given_up_ = std::move(f); }
  /// The unix name each host's hub listens on, and its children link to.
  const std::string& name() const noexcept { return name_; }
  /// Kills every hub (the master is ending).
  void shutdown() noexcept;

  /// How often a host's hub is started again after it ended while its master ran.
  static constexpr int max_restarts = 3;

 private:
  struct hub;
  void start_one(const std::shared_ptr<hub>& h);

  asio::io_context& io_;
  backend& backend_;
  const fiber::config& cfg_;
  std::string job_id_, endpoint_, credentials_, name_;
  std::map<std::string, std::shared_ptr<hub>> hubs_;  // by host
  std::set<std::string> ids_;                          // the routing ids of the hubs now started
  unique_function<void(const std::string&, const std::string&)> given_up_;
  int next_id_ = 0;
  bool shut_down_ = false;
};

}  // namespace fiber::detail
