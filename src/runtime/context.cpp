#include "fiber/context.hpp"

#include <asio/post.hpp>
#include <cstdio>
#include <cstdlib>

#include "fiber/op.hpp"
#include "core/log.hpp"
#include "backend/zygote.hpp"
#include "runtime/runtime.hpp"
#include "runtime/terminate_guard.hpp"
#include "core/worker_env.hpp"
#include "runtime/init_guard.hpp"

namespace fiber {
namespace detail {
std::shared_ptr<runtime>& worker_runtime() {
  static std::shared_ptr<runtime> rt;
  return rt;
}
std::vector<std::pair<std::string, std::string>>& init_overrides() {
  static std::vector<std::pair<std::string, std::string>> v;
  return v;
}
}  // namespace detail

context::context(fiber::config cfg) {
  if (!detail::worker_runtime() && (std::getenv(detail::env_token) || std::getenv(detail::env_zygote_fd)))
    detail::require_init();  // a child whose main() runs: stop it before it starts anything
  detail::configure_log(cfg.log_level, cfg.log_file, detail::process_name());
  rt_ = std::make_shared<detail::runtime>(nullptr, std::move(cfg));
  detail::guard_on_terminate(rt_);
}

context::context(asio::io_context& io, fiber::config cfg) {
  if (!detail::worker_runtime() && (std::getenv(detail::env_token) || std::getenv(detail::env_zygote_fd)))
    detail::require_init();
  detail::configure_log(cfg.log_level, cfg.log_file, detail::process_name());
  rt_ = std::make_shared<detail::runtime>(&io, std::move(cfg));
  detail::guard_on_terminate(rt_);
}

context::context(std::shared_ptr<detail::runtime> rt) noexcept : rt_(std::move(rt)) {}

context::~context() {
  // Non-daemon processes whose objects went are waited for, as multiprocessing waits for its
  // non-daemon children at exit; stop() then ends what is left.
  if (rt_ && rt_->is_master() && !rt_->is_shut_down()) rt_->holds().wait();
  stop();
}

void context::stop() noexcept {
  if (rt_ && rt_->is_master()) rt_->stop();
}

const fiber::config& context::config() const noexcept { return rt_->cfg(); }
asio::any_io_executor context::get_executor() const noexcept { return rt_->loop().executor(); }
const std::string& context::job_id() const noexcept { return rt_->job_id(); }

std::string context::dashboard_url() const {
  auto* d = rt_->observer().run_dashboard();
  return d ? d->url() : std::string();
}

std::vector<std::string> context::endpoints() const {
  std::vector<std::string> out;
  rt_->loop().run_sync([&] { if (auto& e = rt_->master().links().endpoint(); !e.empty()) out.push_back(e); });
  return out;
}

context& context::default_context() {
  if (auto& w = detail::worker_runtime()) {
    static context worker_ctx(w);
    return worker_ctx;
  }
  static context ctx(config::load(detail::init_overrides()));
  return ctx;
}

}  // namespace fiber
