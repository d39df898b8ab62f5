// The master's side of hub_workers=fork (docs/design.md, "Host hubs"): a backend whose children
// are forked by the host hubs (runtime/hubs/hub_spawner), the way MPI's per-node daemons start
// their node's ranks. Each hub's own job holds its host whole; this
// places a child on the host whose linked hub has the most CPUs free (a host's CPUs but one, kept
// for its hub), sends the hub the start, and hears from it what becomes of the child. A child no
// host has room for waits, first come first placed, until a child ends; one asked to end while it
// waits ends without running. A hub that goes takes its children with it: they end as killed.
#pragma once
#include <asio/io_context.hpp>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "runtime/links/direct_listener.hpp"
#include "runtime/hubs/hub_wire.hpp"

namespace fiber::detail {

class hub_forks final : public backend, public std::enable_shared_from_this<hub_forks> {
 public:
  /// `engine`: the backend that starts the hubs (its name and endpoints are this one's);
  /// `listener`: where the hubs link; `hosts`: the hubs' hosts and their CPUs.
  hub_forks(asio::io_context& io, backend& engine, std::shared_ptr<direct_listener> listener,
            const std::vector<hub_host>& hosts);
  ~hub_forks() override;

  std::string name() const override { return engine_.name(); }
  std::string listen_endpoint(const std::string& job_id) const override { return engine_.listen_endpoint(job_id); }
  std::string advertised(const std::string& bound) const override { return engine_.advertised(bound); }
  std::vector<hub_host> hub_hosts() const override { return engine_.hub_hosts(); }
  /// Throws errc::unsatisfiable for a child that asks for GPUs, or for more CPUs than any host's
  /// hub has.
  void check_capacity(const spawn_spec& spec) const override;
  std::unique_ptr<job> spawn(const spawn_spec& spec) override;

  // What the master hears of its hubs (direct_listener::hub_watch, host_hubs).
  void linked(const std::string& host, const std::string& hub);
  void unlinked(const std::string& hub);
  void news(const std::string& hub, const std::string& start, multipart&& parts);
  /// No hub will run on `host` again (host_hubs gave up): children waiting for room end, when no
  /// host is left, with `why`.
  void given_up(const std::string& host, const std::string& why);

  struct state;  // a child, from spawn() to its end
  void signal(const std::shared_ptr<state>& s, int sig);
  /// Its job is gone: a child still waiting is forgotten, a running one killed.
  void forget(const std::shared_ptr<state>& s);

 private:
  struct host {
    std::string hub{};  // the linked hub's id; empty while none is
    int free = 0, cpus = 0;
    bool gone = false;  // its hub will not run again
  };
  void place();
  /// `host`'s hub went: the children it started end as killed.
  void lose(const std::string& host);
  void send(const std::string& hub, hub_wire::op o, std::uint64_t start, const std::string& body);
  void end(const std::shared_ptr<state>& s, int code, std::string detail);
  void set_reason(const std::shared_ptr<state>& s, std::string reason);
  std::string waiting_reason() const;

  asio::io_context& io_;
  backend& engine_;
  std::shared_ptr<direct_listener> listener_;
  std::map<std::string, host> hosts_;                          // by name
  std::map<std::uint64_t, std::shared_ptr<state>> placed_;      // by start number, until they end
  std::deque<std::shared_ptr<state>> waiting_;
  std::uint64_t next_start_ = 0;
  bool closed_ = false;
};

}  // namespace fiber::detail
