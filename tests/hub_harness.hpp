// A master's listener, a host hub linked to it over TLS on this host, and children linked to
// the hub, for the tests of host hubs (host_hub_test, hub_forks_test).
#pragma once
#include "run_folder.hpp"
#include <unistd.h>

#include <asio/io_context.hpp>
#include <atomic>
#include <future>
#include <thread>

#include "backend/backend.hpp"
#include "fiber/config.hpp"
#include "runtime/links/direct_listener.hpp"
#include "runtime/links/direct_connect.hpp"
#include "runtime/hubs/host_hub.hpp"
#include "transport/tls_session.hpp"

namespace hub_harness {
using namespace fiber::detail;
using namespace std::chrono_literals;

inline const auto job_key = tls_session::key_for("the job's secret");
inline const std::string password = "the password";

inline multipart message_of(std::initializer_list<std::string> parts) {
  multipart m;
  for (auto& p : parts) m.emplace_back(p.data(), p.size());
  return m;
}

/// A master's listener on 127.0.0.1 that expects children "7" and "8", and hub "hub-1".
struct master {
  asio::io_context io;
  std::shared_ptr<direct_listener> listener;
  std::string address;  // tls://127.0.0.1:<port>
  std::vector<std::pair<std::string, multipart>> received;

  explicit master(std::chrono::milliseconds silence = 60s) {
    listener = std::make_shared<direct_listener>(
        io, password, 1 << 30, 10s, [](const std::string& id) { return id == "7" || id == "8"; },
        [this](const std::string& id, multipart&& m) { received.emplace_back(id, std::move(m)); });
    listener->accept_hubs([](const std::string& id) { return id == "hub-1"; });
    auto bound = listener->listen_tcp("127.0.0.1", job_key, 20ms, silence);
    address = "tls://" + bound.substr(6);
  }
  /// Runs until `done`, at most `limit` (against a hang, not as a measurement).
  template <class F>
  bool run_until(F done, std::chrono::seconds limit = 60s) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < end) io.run_one_for(20ms);
    return done();
  }
};

/// A hub process's part, on a thread of its own: linked to the master as `id`, listening for
/// children on a unix name of this test's own.
struct hub {
  asio::io_context io;
  std::shared_ptr<host_hub> relay;
  std::atomic<bool> ended = false;
  std::jthread loop;

  /// `forks`: it forks children with the local backend when the master asks, as a hub process
  /// does (hub_workers=fork); else it refuses.
  /// `pulse`: how often it speaks to the master when it has nothing else to say.
  hub(master& m, const std::string& id = "hub-1", std::chrono::milliseconds silence = 60s, bool forks = false,
      std::chrono::milliseconds pulse = 50ms) {
    unique_function<std::unique_ptr<backend>()> children;
    if (forks) children = [this] { return make_local_backend(io, fiber::config{}); };
    auto f = std::async(std::launch::async, [&] { return connect_tls_link(io, m.address, id, job_key, 10s, 60s, link_role::hub); });
    m.run_until([&] { return f.wait_for(0s) == std::future_status::ready; });
    relay = std::make_shared<host_hub>(io, f.get(), password, 1 << 20, 10s, std::move(children));
    relay->start("fiber-hub-test-" + fiber_test::run_id(), [this] { ended = true; }, pulse, silence);
    loop = std::jthread([this](std::stop_token st) {
      while (!st.stop_requested()) io.run_one_for(20ms);
    });
  }
  ~hub() {
    loop.request_stop();
    loop.join();
    relay->close();
  }
};

/// A child on the hub's host: linked to the hub as a local child to its master.
struct child {
  asio::io_context io;
  std::shared_ptr<stream_link> link;
  std::vector<multipart> received;
  bool closed = false;

  child(const hub& h, const std::string& id) {
    link = connect_direct_link(io, h.relay->endpoint(), id, password, std::chrono::seconds(30));
    link->start([this](multipart m) { received.push_back(std::move(m)); }, [this](std::error_code) { closed = true; });
  }
};

}  // namespace hub_harness
