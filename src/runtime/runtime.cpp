#include "runtime/runtime.hpp"

#include "core/build_id.hpp"
#include "core/token_file.hpp"
#include "core/malloc_tuning.hpp"
#include "core/process_memory.hpp"

#include <asio/post.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "core/log.hpp"
#include "core/message_limit.hpp"
#include "core/worker_env.hpp"
#include "runtime/observe/recording_handoff.hpp"
#include "runtime/nested/spawn_host.hpp"
#include "runtime/nested/spawn_relay.hpp"
#include "runtime/terminate_guard.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

namespace {
std::string random_job_id() {
  std::random_device rd;
  std::uint64_t v = (std::uint64_t{rd()} << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return std::string(buf, 12);
}
}  // namespace


runtime::runtime(asio::io_context* external, fiber::config cfg)
    : cfg_(std::move(cfg)), job_id_(random_job_id()), keys_(job_keys::generate()),
      loop_(external, /*standby=*/true, std::chrono::microseconds(cfg_.wait_spin_us)) {
  keep_freed_memory(cfg_.malloc_keep_mb);
  master_ = std::make_shared<master_side>(loop_.io(), zctx_, cfg_, job_id_, keys_, gets_, services_);
  route_ = &master_->channels();
  master_->reports().record_with([this](record_kind k, std::string_view name, std::uint64_t c, std::uint64_t d,
                                        std::string_view text) { observer_.record_child_event(k, name, c, d, text); });
  master_->reports().take_records_with([this](std::uint64_t sender, std::uint64_t now, std::string_view tree,
                                              std::string_view records) {
    observer_.take_record_batch(sender, now, tree, records);
  });
  master_->reports().take_pool_views_with([this](std::uint64_t pool, std::string_view tree, std::string_view state, bool ended) {
    if (auto* d = observer_.run_dashboard()) d->view().show_pool(pool, tree, state, ended);
  });
  // The tree's nested masters on a cluster backend start their children through this one.
  services_.keep<spawn_host>(spawn_wire::service_id, [&] {
    return std::make_shared<spawn_host>(
        *master_, spawn_limits{cfg_.executable.empty() ? executable_path() : cfg_.executable, cfg_.max_depth});
  });
  observer_.open_top(job_id_);
}

runtime::runtime(fiber::config cfg, std::string job_id, job_keys keys, const std::string& master_endpoint, const std::string& token)
    : cfg_(std::move(cfg)), job_id_(std::move(job_id)), keys_(std::move(keys)), loop_(nullptr, /*standby=*/false, std::chrono::microseconds(cfg_.wait_spin_us)) {
  channel_prefix_ = std::stoull(token) << 32;
  depth_ = 1;
  if (const char* d = std::getenv(env_depth); d && std::atoi(d) > 0) depth_ = std::atoi(d);
  worker_ = std::make_shared<worker_side>(loop_, zctx_, cfg_, keys_, master_endpoint, token, gets_, services_);
  route_ = worker_.get();
  // What this process records (the pools it runs as a master of its own) goes to the top master,
  // which keeps the run's one recording.
  const char* tree = std::getenv(env_tree_name);
  observer_.open_relay(*worker_, channel_prefix_, tree ? tree : "");
}

runtime::~runtime() { stop(); }

void runtime::stop() noexcept {
  if (!worker_) unguard_on_terminate(this);
  loop_.stop([this] { shutdown(); });
  // Waits, within each socket's linger, until what was sent has left this process.
  zctx_.close();
}




void runtime::run_soon(unique_function<void()> f) {
  if (shut_down_) return;
  loop_.run_or_post([f = std::move(f), weak = weak_from_this()]() mutable {
    if (auto self = weak.lock(); self && !self->shut_down_) f();
  });
}

master_side& runtime::master() {
  if (master_) return *master_;
  if (shut_down_) throw error(errc::closed, "the fiber context has shut down");
  // A child that starts children becomes their master (docs/design.md, "Nested processes"): its
  // own listening socket, backend and credentials; the tree's queues stay with the top master.
  if (depth_ >= cfg_.max_depth)
    throw error(errc::too_deep, "this process is at depth " + std::to_string(depth_) +
                                         " of its job's tree (the master is at 0) and config max_depth=" +
                                         std::to_string(cfg_.max_depth) +
                                         " allows no children below it: raise max_depth, or start them from a process "
                                         "nearer the master");
  subtree_keys_ = job_keys::generate();
  master_ = std::make_shared<master_side>(loop_.io(), zctx_, cfg_, job_id_, subtree_keys_, gets_, services_);
  master_->forward_channels_to(worker_.get());
  observer_.became_nested_master();
  worker_->pass_replies_to([m = master_.get()](const header& h, multipart& payload) { return m->pass_reply_down(h, payload); });
  if (cfg_.backend != "local") {
    // A container, a pod or a Slurm job reaches no engine: the top master starts this process's
    // children, asked through the masters above (runtime/nested/spawn_relay).
    std::uint64_t handle = 0;
    if (const char* h = std::getenv(env_spawn_handle)) handle = std::strtoull(h, nullptr, 10);
    auto& relay = services_.keep<spawn_relay>(spawn_wire::service_id, [&] {
      return std::make_shared<spawn_relay>(*worker_, *master_, cfg_.backend, handle);
    });
    master_->use_backend(relay.make_backend());
  }
  // Its children are heard while its target computes, not only while it blocks in fiber.
  loop_.start_standby();
  return *master_;
}







const job_keys& runtime::keys() const noexcept { return worker_ ? worker_->keys() : keys_; }

worker_side& runtime::worker() {
  if (!worker_) throw error(errc::not_started, "this is the master: it has no master to talk to");
  return *worker_;
}

std::uint64_t runtime::new_channel_id() noexcept { return channel_prefix_ | next_channel_.fetch_add(1); }

// ---- queues and pipes ------------------------------------------------------------------------

void runtime::put(std::uint64_t channel, writer& w) {
  check_message_size("a queue or pipe message would", w.total_size(), cfg_.max_message_bytes, "send smaller pieces");
  if (shut_down_) throw error(errc::closed, "the fiber context has shut down");
  route_->put(channel, to_frames(w));
}

void runtime::get(std::uint64_t channel, std::optional<std::chrono::milliseconds> timeout, get_handler h) {
  if (shut_down_) {
    h(make_error_code(errc::closed), {}, false);
    return;
  }
  auto request = gets_.add(channel, std::move(h));
  if (timeout)
    gets_.expire_after(request, loop_.io(), *timeout, [weak = weak_from_this()](std::uint64_t ch, std::uint64_t req) {
      if (auto self = weak.lock(); self && !self->shut_down_) self->route_->cancel_get(ch, req);
    });
  route_->get(channel, request);
}

void runtime::release(std::uint64_t channel) noexcept { route_->release(channel); }

void runtime::shutdown() noexcept {
  if (shut_down_) return;
  observer_.ending();
  shut_down_ = true;
  services_.shutdown_all();
  if (master_) master_->shutdown();  // its children end with it
  if (worker_) {
    observer_.close_recording();  // its last records go up while the connection is there
    worker_->shutdown();
  }
  observer_.close();  // after the services: a pool's end is in the recording
  // A master in a Kubernetes pod, followed by `fiber run`: the recording goes to it before the
  // pod (and its files) can go.
  if (auto token = token_in_file(env_record_handoff_file); !token.empty() && !worker_ && !observer_.recorder().path().empty())
    hand_off_recording(observer_.recorder().path(), token, std::chrono::seconds(60), [](const handoff_offer& offer) {
      std::fprintf(stderr, "%s\n", handoff_line(offer).c_str());
      std::fflush(stderr);
    });
}

void runtime::replace_config(fiber::config cfg) {
  cfg_ = std::move(cfg);
  loop_.set_spin(std::chrono::microseconds(cfg_.wait_spin_us));
  if (worker_) worker_->retune();
}

}  // namespace fiber::detail
