// In a child that starts children of its own on a cluster backend (nested): a container, a pod
// or a Slurm job reaches no engine, so the backend here asks the top master, through each master
// above, to start, signal and watch its children (runtime/nested/spawn_host), and this process passes
// the same asks of its own children up, and their news down.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "runtime/services/service_registry.hpp"
#include "runtime/nested/spawn_wire.hpp"

namespace fiber::detail {
class master_side;
class worker_side;
class relayed_run;  // a child asked for here (runtime/nested/relayed_run.hpp)

class spawn_relay final : public service, public std::enable_shared_from_this<spawn_relay> {
 public:
  /// `own_handle`: this process's number at the top master (env_spawn_handle), 0 for a child of
  /// the top master itself.
  spawn_relay(worker_side& up, master_side& down, std::string backend_name, std::uint64_t own_handle);

  /// The backend this process's master side starts children with: it asks through this relay.
  std::unique_ptr<backend> make_backend();

  void on_message(const std::string& peer, const header& h, multipart&& payload) override;
  void on_peer_gone(const std::string& peer) noexcept override;

  /// Asks the top for a child; its news reach `run`.
  void start(const spawn_spec& spec, const std::shared_ptr<relayed_run>& run);
  void send_up(kind k, std::uint64_t request, std::uint32_t aux) noexcept;

 private:
  void send_up(kind k, std::uint64_t request, std::uint32_t aux, const std::string& body) noexcept;
  void hear(std::uint64_t request, spawn_wire::event e, const spawn_wire::child_news& news);

  worker_side& up_;
  master_side& down_;
  std::string backend_name_;
  std::uint64_t own_handle_;
  std::uint64_t next_request_ = 0;
  std::unordered_map<std::uint64_t, std::weak_ptr<relayed_run>> own_;                    // asked for here
  std::unordered_map<std::uint64_t, std::pair<std::string, std::uint64_t>> passed_;  // ours -> (child, its number)
  std::map<std::pair<std::string, std::uint64_t>, std::uint64_t> passed_ids_;        // the reverse
};

}  // namespace fiber::detail
