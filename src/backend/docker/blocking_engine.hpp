// Docker Engine operations run to completion, for callers that may block.
#pragma once
#include <asio/io_context.hpp>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "backend/docker/docker_engine.hpp"
#include "core/log.hpp"
#include "fiber/error.hpp"
#include "transport/run_until.hpp"

namespace fiber::detail {

/// Runs engine operations to completion on a private io_context, for the steps that must block:
/// the backend's first contact with the engine and its removal of what is left when the master
/// ends (the caller's io_context may not run again), and the fiber command's every step.
class blocking_engine {
 public:
  explicit blocking_engine(const std::string& host) : engine_(io_, host) {}

  /// For operations that run side by side (a log stream and a wait): start them on engine(),
  /// then run io().
  docker_engine& engine() noexcept { return engine_; }
  asio::io_context& io() noexcept { return io_; }

  template <class T, class Start>
  T run(Start start) {
    std::optional<std::tuple<std::error_code, T, std::string>> out;
    start(engine_, [&](std::error_code ec, T v, std::string why) { out.emplace(ec, std::move(v), std::move(why)); });
    run_until(io_, [&] { return out.has_value(); });
    if (!out) throw error(errc::backend_unavailable, "the Docker engine at " + engine_.host() + " did not answer");
    auto& [ec, v, why] = *out;
    if (ec) throw error(ec, why);
    return std::move(v);
  }

  /// Force-removes `ids`, all at once; failures are logged.
  void remove_all(const std::vector<std::string>& ids) {
    std::size_t pending = ids.size();
    for (auto& id : ids)
      engine_.containers().remove(id, true, [&pending, id](std::error_code ec, bool, const std::string& why) {
        --pending;
        if (ec && !benign_remove_error(why))
          logf(log_level::warn, "could not remove container ", id.substr(0, 12), ": ", why);
      });
    run_until(io_, [&] { return pending == 0; });
  }

 private:
  asio::io_context io_;
  docker_engine engine_;
};

}  // namespace fiber::detail
