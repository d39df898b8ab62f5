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
                              std::string_view text) { record_child_event(k, name, c, d, text); });
  master_->reports().take_records_with([this](std::uint64_t sender, std::uint64_t now, std::string_view tree, std::string_view records) {
    take_record_batch(sender, now, tree, records);
  });
  master_->reports().take_pool_views_with([this](std::uint64_t pool, std::string_view tree, std::string_view state, bool ended) {
    if (dashboard_) dashboard_->view().show_pool(pool, tree, state, ended);
  });
  // The tree's nested masters on a cluster backend start their children through this one.
  services_.keep<spawn_host>(spawn_wire::service_id, [&] {
    return std::make_shared<spawn_host>(
        *master_, spawn_limits{cfg_.executable.empty() ? executable_path() : cfg_.executable, cfg_.max_depth});
  });
  recorder_.open(cfg_, job_id_);
  loop_.run_or_post([this] { sample_memory_every(); });
  if (cfg_.dashboard) {
    dashboard_ = std::make_unique<dashboard>(loop_.io(), cfg_, dashboard_view(job_id_, program_name(), cfg_.backend));
    std::fprintf(stderr, "fiber: dashboard of run %s at %s\n", job_id_.c_str(), dashboard_->printed_url().c_str());
    // Not run_soon: this runtime has no shared_ptr of its own yet.
    loop_.run_or_post([d = dashboard_.get()] { d->start(); });
  }
}

runtime::runtime(fiber::config cfg, std::string job_id, job_keys keys, std::string master_endpoint, std::string token)
    : cfg_(std::move(cfg)), job_id_(std::move(job_id)), keys_(std::move(keys)), loop_(nullptr, /*standby=*/false, std::chrono::microseconds(cfg_.wait_spin_us)) {
  channel_prefix_ = std::stoull(token) << 32;
  depth_ = 1;
  if (const char* d = std::getenv(env_depth); d && std::atoi(d) > 0) depth_ = std::atoi(d);
  worker_ = std::make_shared<worker_side>(loop_, zctx_, cfg_, keys_, master_endpoint, token, gets_, services_);
  route_ = worker_.get();
  // What this process records (the pools it runs as a master of its own) goes to the top master,
  // which keeps the run's one recording.
  const char* tree = std::getenv(env_tree_name);
  recorder_.open_relay(cfg_, [this, tree = std::string(tree ? tree : "")](std::string_view records, std::uint64_t now) {
    auto m = std::make_shared<multipart>(make_message(kind::record_batch, {}, as_pod(channel_prefix_ >> 32), as_pod(now),
                                                      tree, records));
    if (loop_.this_thread_drives()) return worker_->send_upstream(std::move(*m));
    asio::post(loop_.io(), [this, m] {
      if (!shut_down_) worker_->send_upstream(std::move(*m));
    });
  });
  loop_.run_or_post([this] { sample_memory_every(); });
}

runtime::~runtime() { stop(); }

void runtime::stop() noexcept {
  if (!worker_) unguard_on_terminate(this);
  loop_.stop([this] { shutdown(); });
  // Waits, within each socket's linger, until what was sent has left this process.
  zctx_.close();
}

std::uint64_t runtime::hold_until_end(std::shared_ptr<void> what, std::string name) {
  auto id = ++next_held_;
  held_.emplace(id, std::make_pair(std::move(what), std::move(name)));
  none_held_ = false;
  return id;
}

void runtime::let_go(std::uint64_t id) {
  held_.erase(id);
  if (held_.empty()) notify_done(none_held_);
}

void runtime::wait_for_held() {
  if (none_held_ || shut_down_) return;
  if (!owns_loop() || in_loop_thread()) {
    // A caller's io_context runs only when its owner runs it, and the loop's own thread cannot
    // wait for itself: what is held ends with the context instead.
    return;
  }
  std::string names;
  run_sync([&] {
    for (auto& [id, held] : held_) names += (names.empty() ? "" : ", ") + held.second;
  });
  if (names.empty()) return;
  // A warning, so that a program that does not exit says why (a child blocked for ever).
  logf(log_level::warn, "waiting for process(es) ", names,
       " to end before the context ends, as multiprocessing waits for non-daemon children "
       "(join() them, or set_daemon(true) to have them killed instead)");
  wait_until(none_held_);
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

void runtime::record_child_event(record_kind k, std::string_view name, std::uint64_t c, std::uint64_t d,
                                 std::string_view text) {
  if (!worker_) {
    if (recorder_.on()) recorder_.record(k, recorder_.name(name), 0, c, d, text);
    if (dashboard_) dashboard_->view().on_process(k, name, c, d, text);
    return;
  }
  if ((!cfg_.record && !cfg_.dashboard) || shut_down_) return;  // the top master has no use for it
  worker_->send_upstream(make_message(kind::record, {.aux = static_cast<std::uint32_t>(k)}, name, as_pod(c), as_pod(d), text));
}

void runtime::show_pool_upstream(std::uint64_t pool, std::string_view state, bool ended) {
  if (!shows_pools_upstream() || shut_down_) return;
  const char* tree = std::getenv(env_tree_name);
  auto m = std::make_shared<multipart>(make_message(kind::pool_view, {.aux = ended ? 1u : 0u}, as_pod(pool),
                                                    std::string_view(tree ? tree : ""), state));
  if (loop_.this_thread_drives()) return worker_->send_upstream(std::move(*m));
  asio::post(loop_.io(), [this, m] {
    if (!shut_down_) worker_->send_upstream(std::move(*m));
  });
}

void runtime::record_memory() {
  if (!recorder_.on()) return;
  auto m = this_process_memory();
  // A child is named by the top master (its place in the tree); the master by this.
  recorder_.record(record_kind::memory, recorder_.name(worker_ ? "" : "master"), 0, m.resident, m.peak);
}

void runtime::record_last_memory() {
  if (!last_memory_recorded_.exchange(true)) record_memory();
}

void runtime::sample_memory_every() {
  // Not on a caller's io_context: a timer of fiber's that never ends would keep its run() from
  // returning once the caller's own work is done. There, the memory is recorded at the end.
  if (!recorder_.on() || cfg_.record_memory_ms <= 0 || shut_down_ || !loop_.owns_loop()) return;
  if (!memory_timer_) memory_timer_ = std::make_unique<asio::steady_timer>(loop_.io());
  memory_timer_->expires_after(std::chrono::milliseconds(cfg_.record_memory_ms));
  // Cancelled by shutdown(): `this` is touched only when the wait ran out.
  memory_timer_->async_wait([this](std::error_code ec) {
    if (ec || shut_down_) return;
    record_memory();
    sample_memory_every();
  });
}

void runtime::take_record_batch(std::uint64_t sender, std::uint64_t child_now, std::string_view tree,
                                std::string_view records) {
  if (!recorder_.on()) return;
  // The child's names by its numbers; its pools under ids of their own (its prefix above theirs);
  // its clock moved onto this one's (the batch's transit, well under a millisecond on one host,
  // is the error).
  auto& names = relayed_names_[sender];
  auto offset = static_cast<std::int64_t>(recorder_.now_ns()) - static_cast<std::int64_t>(child_now);
  auto in_tree = [&](std::string_view n) {
    if (n.empty()) return std::string(tree);  // the child itself
    return tree.empty() ? std::string(n) : std::string(tree) + "/" + std::string(n);
  };
  for (std::size_t at = 0; at + sizeof(flight_record) <= records.size();) {
    flight_record r;
    std::memcpy(&r, records.data() + at, sizeof r);
    at += sizeof r;
    if (at + r.text_size > records.size()) break;
    auto text = records.substr(at, r.text_size);
    at += r.text_size;
    if (r.kind == record_kind::name) {
      names[r.a] = recorder_.name(in_tree(text));
      continue;
    }
    auto a = r.a;
    auto b = r.b;
    switch (r.kind) {
      case record_kind::worker_up:
      case record_kind::worker_down:
      case record_kind::task_sent:
      case record_kind::task_done:
      case record_kind::task_lost:
      case record_kind::task_timed_out: a = names[r.a]; [[fallthrough]];
      case record_kind::pool_begin:
      case record_kind::pool_end:
      case record_kind::map_begin:
      case record_kind::map_end: b = (sender << 32) | (r.b & 0xffffffffu); break;
      case record_kind::collective:
      case record_kind::manager_call:
      case record_kind::memory: a = names[r.a]; break;
      default: continue;  // a child's process events come one by one (record_child_event)
    }
    auto ns = std::max<std::int64_t>(0, static_cast<std::int64_t>(r.ns) + offset);
    // A pool says in which process of the tree it runs.
    recorder_.record_at(static_cast<std::uint64_t>(ns), r.kind, a, b, r.c, r.d, r.kind == record_kind::pool_begin ? tree : text);
  }
}

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
  if (memory_timer_) memory_timer_->cancel();
  record_last_memory();  // what it held at its end, and at most
  shut_down_ = true;
  services_.shutdown_all();
  if (master_) master_->shutdown();  // its children end with it
  if (worker_) {
    recorder_.close();  // its last records go up while the connection is there
    worker_->shutdown();
  }
  recorder_.close();  // after the services: a pool's end is in the recording
  if (dashboard_) dashboard_->close();
  // A master in a Kubernetes pod, followed by `fiber run`: the recording goes to it before the
  // pod (and its files) can go.
  if (auto token = token_in_file(env_record_handoff_file); !token.empty() && !worker_ && !recorder_.path().empty())
    hand_off_recording(recorder_.path(), token, std::chrono::seconds(60), [](const handoff_offer& offer) {
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
