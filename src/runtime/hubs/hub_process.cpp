#include "runtime/hubs/hub_process.hpp"

#include <asio/io_context.hpp>
#include <cstdlib>
#include <sstream>

#include "backend/backend.hpp"
#include "core/log.hpp"
#include "fiber/config.hpp"
#include "core/worker_env.hpp"
#include "runtime/links/direct_connect.hpp"
#include "runtime/hubs/host_hub.hpp"
#include "runtime/trust/job_security.hpp"
#include "runtime/trust/worker_credentials.hpp"

namespace fiber::detail {

int run_hub_process() {
  auto name = env_or_empty(env_name);
  configure_log(log_level::warn, "", name.empty() ? "Hub" : name);
  job_keys keys;
  std::size_t max_message_bytes = 0;
  long long start_timeout = 0, interval = 0, silence = 0;
  try {
    keys = take_worker_credentials();  // what the hub forks gets its own from the master's spec
    std::istringstream settings(env_or_empty(env_hub_settings));
    if (!(settings >> max_message_bytes >> start_timeout >> interval >> silence) || interval <= 0)
      throw std::invalid_argument(std::string(env_hub_settings) + " is not four numbers");
  } catch (const std::exception& e) {
    logf(log_level::error, "started as a fiber host hub without what it needs: ", e.what());
    return 2;
  }
  asio::io_context io;
  std::shared_ptr<stream_link> master;
  try {
    master = connect_tls_link(io, env_or_empty(env_endpoint), env_or_empty(env_token), tls_session::key_for(keys.client_secret),
                              std::chrono::milliseconds(start_timeout), std::chrono::milliseconds(silence), link_role::hub);
  } catch (const std::exception& e) {
    logf(log_level::error, "cannot reach the master at ", env_or_empty(env_endpoint), ": ", e.what());
    return exit_master_lost;
  }
  // hub_workers=fork: this host's children are forked here, from a fork server of the hub's own.
  auto children = [&io] {
    fiber::config local;
    local.start_method = "forkserver";
    local.gpus = "none";  // the master starts no child that asks for GPUs this way
    return make_local_backend(io, local);
  };
  auto hub = std::make_shared<host_hub>(io, master, keys.password, max_message_bytes + stream_link::envelope_bytes,
                                        std::chrono::milliseconds(start_timeout), children);
  try {
    hub->start(env_or_empty(env_hub), [&io] { io.stop(); }, std::chrono::milliseconds(interval),
               std::chrono::milliseconds(silence));
  } catch (const std::exception& e) {
    logf(log_level::error, e.what(), " (another hub of this master serves this host)");
    return 3;
  }
  io.run();
  return 0;
}

}  // namespace fiber::detail
