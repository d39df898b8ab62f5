// In the top master: starts the children that the tree's nested masters ask for, with this
// master's backend (only it reaches the engine), tells the asker what becomes of each, and ends
// a subtree when its root ends: the children a process asked for are killed when it ends, and
// everything asked for through a child of this master when that child goes.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/services/service_registry.hpp"
#include "runtime/nested/spawn_policy.hpp"
#include "runtime/nested/spawn_wire.hpp"

namespace fiber::detail {
class master_side;

class spawn_host final : public service, public std::enable_shared_from_this<spawn_host> {
 public:
  spawn_host(master_side& master, spawn_limits limits) : master_(master), limits_(std::move(limits)) {}

  void on_message(const std::string& peer, const header& h, multipart&& payload) override;
  void on_peer_gone(const std::string& peer) noexcept override;
  void on_shutdown() noexcept override;

 private:
  struct child {
    std::unique_ptr<job> the_job;
    std::string peer;          // the child of this master the ask came through
    std::uint64_t request;     // its number for it
    std::uint64_t parent;      // the handle of the process that asked (0: a child of this master)
    int depth;                 // in the tree (this master is 0)
  };
  void start(const std::string& peer, std::uint64_t request, const std::string& text);
  void tell(const std::string& peer, std::uint64_t request, spawn_wire::event e, const spawn_wire::child_news& news);
  void ended(std::uint64_t handle, int code);
  /// Kills and reaps child `handle` and what it started, now.
  void end_now(std::uint64_t handle) noexcept;
  void end_children_of(std::uint64_t parent) noexcept;
  job* find(const std::string& peer, std::uint64_t request);

  master_side& master_;
  spawn_limits limits_;
  std::uint64_t next_handle_ = 0;
  std::map<std::uint64_t, child> children_;                             // by handle
  std::map<std::pair<std::string, std::uint64_t>, std::uint64_t> asked_;  // (peer, request) -> handle
};

}  // namespace fiber::detail
