#include "runtime/hubs/host_hubs.hpp"

#include <unistd.h>

#include <asio/post.hpp>

#include "core/build_id.hpp"
#include "core/log.hpp"
#include "core/worker_env.hpp"

namespace fiber::detail {

struct host_hubs::hub {
  std::string host, id;
  std::unique_ptr<job> running;
  int restarts = 0;
};

host_hubs::host_hubs(asio::io_context& io, backend& b, const fiber::config& cfg, std::string job_id,
                     std::string endpoint, std::string credentials)
    : io_(io),
      backend_(b),
      cfg_(cfg),
      job_id_(std::move(job_id)),
      endpoint_(std::move(endpoint)),
      credentials_(std::move(credentials)),
      // Abstract names are per network namespace, so per host: every hub of this master has it.
      name_("fiber-hub-" + job_id_ + "-" + std::to_string(::getpid())) {}

host_hubs::~host_hubs() { shutdown(); }

void host_hubs::start(const std::vector<hub_host>& hosts) {
  for (auto& where : hosts) {
    if (hubs_.contains(where.name)) continue;
    auto h = std::make_shared<hub>();
    h->host = where.name;
    hubs_.emplace(where.name, h);
    start_one(h);
  }
}

void host_hubs::start_one(const std::shared_ptr<hub>& h) {
  ids_.erase(h->id);
  h->id = "hub-" + std::to_string(++next_id_);
  ids_.insert(h->id);
  spawn_spec spec;
  spec.name = "hub-" + h->host;
  spec.job_id = job_id_;
  spec.executable = cfg_.executable.empty() ? executable_path() : cfg_.executable;
  spec.args = {hub_flag};
  spec.host = h->host;
  spec.whole_host = cfg_.hub_workers == "fork";
  spec.env = {{env_token, h->id},
              {env_endpoint, endpoint_},
              {env_job, job_id_},
              {env_name, spec.name},
              {env_hub, name_},
              {env_hub_settings, std::to_string(cfg_.max_message_bytes) + " " + std::to_string(cfg_.start_timeout_ms) +
                                     " " + std::to_string(cfg_.heartbeat_interval_ms) + " " +
                                     std::to_string(cfg_.heartbeat_timeout_ms)}};
  spec.secret = credentials_;
  h->running = backend_.spawn(spec);
  h->running->on_exit([this, weak = std::weak_ptr<hub>(h)](int code) {
    auto ended = weak.lock();
    if (!ended || shut_down_) return;
    auto detail = ended->running ? ended->running->exit_detail() : std::string();
    if (ended->restarts >= max_restarts) {
      auto why = "the host hub on " + ended->host + " ended (" + std::to_string(code) +
                 (detail.empty() ? "" : ": " + detail) + ") " + std::to_string(max_restarts + 1) + " times";
      logf(log_level::error, why,
           cfg_.hub_workers == "fork" ? "; no child is started there" : "; children placed there link to the master directly");
      if (given_up_) given_up_(ended->host, why);
      return;
    }
    logf(log_level::warn, "the host hub on ", ended->host, " ended (", code, detail.empty() ? "" : ": " + detail,
         "); starting it again");
    ++ended->restarts;
    // Not inside the ended job's own callback: starting the next one replaces it.
    asio::post(io_, [this, weak] {
      auto again = weak.lock();
      if (!again || shut_down_) return;
      try {
        start_one(again);
      } catch (const std::exception& e) {
        logf(log_level::error, "cannot start the host hub on ", again->host, " again: ", e.what());
        if (given_up_) given_up_(again->host, std::string("its host hub could not be started again: ") + e.what());
      }
    });
  });
}

std::string host_hubs::host_of(const std::string& id) const {
  for (auto& [host, h] : hubs_)
    if (h->id == id) return host;
  return {};
}

void host_hubs::shutdown() noexcept {
  if (shut_down_) return;
  shut_down_ = true;
  for (auto& [host, h] : hubs_)
    if (h->running) h->running->kill_and_reap();
}

}  // namespace fiber::detail
