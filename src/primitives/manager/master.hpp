// The master's side of a manager (manager_core), as the facade (manager/facade.cpp) and the
// callers (manager/client.cpp) use it. Its members run on fiber's loop thread unless they say.
#pragma once
#include <asio/steady_timer.hpp>

#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "fiber/detail/completion.hpp"
#include "fiber/detail/message.hpp"
#include "fiber/detail/remote_object.hpp"
#include "fiber/detail/unique_function.hpp"
#include "runtime/runtime.hpp"
#include "runtime/services/service_registry.hpp"

namespace fiber::detail {
class child_process;

/// The master's side of a manager: one service per manager, which starts the server, relays every
/// call to it (from this process and from workers holding proxies), and answers them all when the
/// server dies.
class manager_core final : public service, public std::enable_shared_from_this<manager_core> {
 public:
  manager_core(std::shared_ptr<runtime> rt, bool async) : rt_(std::move(rt)), id_(rt_->new_channel_id()), async_(async) {}

  std::uint64_t id() const { return id_; }
  bool async() const { return async_; }
  const std::shared_ptr<runtime>& rt() const { return rt_; }
  int pid() const;

  // ---- on the loop thread

  void start();

  /// A call made in this process.
  std::shared_ptr<completion<message>> call(const object_ref& ref, std::uint64_t method, writer& args);

  /// The manager object is gone: calls from now on are told so by the runtime.
  void detach() { rt_->services().remove(id_); }

  void when_ready(unique_function<void(std::exception_ptr)> f);

  /// Asks the server to exit; kills it after terminate_grace_ms. `done` once it is gone.
  void shutdown(unique_function<void()> done);

  void on_message(const std::string& peer, const header& h, multipart&& payload) override;

 private:
  struct pending {
    std::string peer;  // a child's call; empty: ours
    std::uint64_t call = 0;
    std::shared_ptr<completion<message>> local;
  };

  void on_reply(const header& h, multipart&& payload);

  void send_to_server(multipart&& m, std::uint64_t relay);

  /// Calls wait until the server is up.
  bool ready_to_send() const { return started_; }

  void flush_waiting();

  void forward(std::uint64_t relay, multipart&& body);

  void fail(std::uint64_t relay, errc code, const std::string& what);

  void on_started(std::error_code ec, const std::string& what);

  void on_server_ended();

  void fail_all();

  void notify_ready();

  std::shared_ptr<runtime> rt_;
  std::uint64_t id_;
  bool async_;
  std::shared_ptr<child_process> proc_;
  bool started_ = false, stopping_ = false, dead_ = false;
  std::string dead_text_;
  std::unordered_map<std::uint64_t, pending> pending_;
  std::deque<multipart> waiting_;  // calls made before the server was up
  std::uint64_t next_relay_ = 1;
  std::vector<unique_function<void(std::exception_ptr)>> ready_waiters_;
  std::unique_ptr<asio::steady_timer> kill_timer_;
};

/// A call made in the master, through the manager's service (failed when it is gone).
/// Whether manager `manager` is served from this process (its server is this process's child).
bool manager_here(runtime& rt, std::uint64_t manager);
std::shared_ptr<completion<message>> call_at_master(runtime& rt, const object_ref& ref, std::uint64_t method,
                                                    writer& args);

}  // namespace fiber::detail
