// The master's side of a ring: the service that starts its members (each a child_process), keeps
// its rendezvous store (ring/rendezvous_store.hpp), ends a run when a member is lost, restarts
// it while ring_options::max_restarts allows, and completes start() and join(). The members'
// collectives run between them directly (ring/collectives, ring/mesh); the facade is
// ring/facade.cpp. On fiber's loop thread, but for what says otherwise.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fiber/detail/completion.hpp"
#include "fiber/ring.hpp"
#include "primitives/ring/rendezvous_store.hpp"
#include "runtime/services/service_registry.hpp"

namespace fiber::detail {
class runtime;
class child_process;
struct function_entry;

class ring_core final : public service, public std::enable_shared_from_this<ring_core> {
 public:
  ring_core(std::shared_ptr<runtime> rt, int size, void (*f)(ring_member&), ring_options options);
  /// No more messages for this ring.
  void detach();

  int size() const noexcept { return size_; }
  /// The members of the current run (a restart replaces them), from any thread.
  std::vector<std::shared_ptr<child_process>> members() const;
  const std::shared_ptr<runtime>& rt() const noexcept { return rt_; }
  int restarts() const noexcept { return restarts_.load(); }

  std::shared_ptr<completion<std::monostate>> start();
  std::shared_ptr<completion<std::monostate>> join();
  void kill_all() noexcept;
  bool any_alive() const noexcept;

  void on_message(const std::string& peer, const header& h, multipart&& payload) override;
  void on_shutdown() noexcept override { store_.drop_waiting(); }

 private:
  void reply(const std::string& peer, std::uint64_t request, std::string_view value);
  void reply_error(const std::string& peer, std::uint64_t request, errc code, const std::string& text);
  /// The members of a run: new processes, a new secret (links of an earlier run cannot mix in).
  void make_members();
  void start_members();
  /// After a loss, with restarts left: every member ends, then a new run starts from nothing.
  bool restart_if_allowed();
  /// Posted: this runs inside a member's own callback, and the next run replaces the members.
  void begin_next_run_soon();
  void maybe_begin_next_run();
  bool any_not_ended() const;
  void on_member_started(int rank, std::error_code ec, const std::string& what);
  void fail_start(int rank, std::error_code ec, const std::string& what);
  void on_member_ended(int rank);
  void finish_joins();

  std::shared_ptr<runtime> rt_;
  std::uint64_t id_;
  ring_options options_;
  const function_entry* entry_ = nullptr;
  int number_ = 0, size_ = 0;
  mutable std::mutex members_mutex_;  // members_ is replaced on the loop and read by pids()
  std::vector<std::shared_ptr<child_process>> members_;
  std::set<std::string> current_peers_;
  std::atomic<int> restarts_{0};
  bool restarting_ = false;
  bool detached_ = false;  // the ring object is gone
  bool started_ = false;
  int running_ = 0;
  std::shared_ptr<completion<std::monostate>> starting_;
  std::vector<std::shared_ptr<completion<std::monostate>>> joins_;
  rendezvous_store store_;
  std::optional<std::string> lost_;
};

}  // namespace fiber::detail
