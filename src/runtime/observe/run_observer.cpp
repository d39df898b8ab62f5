#include "runtime/observe/run_observer.hpp"

#include <asio/post.hpp>

#include <cstdio>
#include <cstring>

#include "core/process_memory.hpp"
#include "core/worker_env.hpp"
#include "runtime/protocol.hpp"
#include "runtime/worker_side.hpp"

namespace fiber::detail {

run_observer::~run_observer() { *alive_ = false; }

void run_observer::open_top(const std::string& job_id) {
  recorder_.open(cfg_, job_id);
  loop_.run_or_post([this] { start_sampling(); });
  if (!cfg_.dashboard) return;
  dashboard_ = std::make_unique<dashboard>(loop_.io(), cfg_, dashboard_view(job_id, program_name(), cfg_.backend));
  std::fprintf(stderr, "fiber: dashboard of run %s at %s\n", job_id.c_str(), dashboard_->printed_url().c_str());
  loop_.run_or_post([d = dashboard_.get()] { d->start(); });
}

void run_observer::open_relay(worker_side& up, const std::uint64_t& channel_prefix, std::string tree) {
  up_ = &up;
  recorder_.open_relay(cfg_, [this, prefix = &channel_prefix, tree = std::move(tree)](std::string_view records,
                                                                                     std::uint64_t now) {
    send_up(std::make_shared<multipart>(
        make_message(kind::record_batch, {}, as_pod(*prefix >> 32), as_pod(now), tree, records)));
  });
  // What the worker says to its master, or hears from it, is its work: its memory is sampled
  // while there is some.
  up.on_activity([this] {
    if (sampler_ && !sampling_) sampler_->worked();  // its own sample going up is not work
  });
  loop_.run_or_post([this] { start_sampling(); });
}

void run_observer::send_up(const std::shared_ptr<multipart>& m) {
  if (loop_.this_thread_drives()) return up_->send_upstream(std::move(*m));
  asio::post(loop_.io(), [this, alive = std::weak_ptr<bool>(alive_), m] {
    if (alive.lock() && !ending_) up_->send_upstream(std::move(*m));
  });
}

void run_observer::show_pool_upstream(std::uint64_t pool, std::string_view state, bool ended) {
  if (!shows_pools_upstream() || ending_) return;
  const char* tree = std::getenv(env_tree_name);
  send_up(std::make_shared<multipart>(make_message(kind::pool_view, {.aux = ended ? 1u : 0u}, as_pod(pool),
                                                   std::string_view(tree ? tree : ""), state)));
}

void run_observer::record_child_event(record_kind k, std::string_view name, std::uint64_t c, std::uint64_t d,
                                      std::string_view text) {
  if (!up_) {
    if (recorder_.on()) recorder_.record(k, recorder_.name(name), 0, c, d, text);
    if (dashboard_) dashboard_->view().on_process(k, name, c, d, text);
    return;
  }
  if ((!cfg_.record && !cfg_.dashboard) || ending_) return;  // the top master has no use for it
  up_->send_upstream(make_message(kind::record, {.aux = static_cast<std::uint32_t>(k)}, name, as_pod(c), as_pod(d), text));
}

void run_observer::record_memory() {
  if (!recorder_.on()) return;
  auto m = this_process_memory();
  // A child is named by the top master (its place in the tree); the master by this.
  recorder_.record(record_kind::memory, recorder_.name(up_ ? "" : "master"), 0, m.resident, m.peak);
  // A child's records go up with it (its memory on the run's page stays current), not only when
  // its batch fills.
  if (up_ && cfg_.dashboard) recorder_.flush();
}

void run_observer::record_last_memory() {
  if (!last_memory_recorded_.exchange(true)) record_memory();
}

void run_observer::start_sampling() {
  // Not on a caller's io_context: a timer of fiber's that never ends would keep its run() from
  // returning once the caller's own work is done. There, the memory is recorded at the end.
  if (!recorder_.on() || cfg_.record_memory_ms <= 0 || ending_ || !loop_.owns_loop() || sampler_) return;
  sampler_.emplace(loop_.io(), std::chrono::milliseconds(cfg_.record_memory_ms), /*sleeps=*/up_ != nullptr,
                   [this] {
                     sampling_ = true;
                     record_memory();
                     sampling_ = false;
                   });
  sampler_->start();
}

void run_observer::ending() {
  if (sampler_) sampler_->stop();
  record_last_memory();  // what it held at its end, and at most
  ending_ = true;
}

void run_observer::close() {
  recorder_.close();  // after the services: a pool's end is in the recording
  if (dashboard_) dashboard_->close();
}

void run_observer::take_record_batch(std::uint64_t sender, std::uint64_t child_now, std::string_view tree,
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
      auto full = in_tree(text);
      names[r.a] = {recorder_.name(full), full};
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
      case record_kind::task_timed_out: a = names[r.a].ours; [[fallthrough]];
      case record_kind::pool_begin:
      case record_kind::pool_end:
      case record_kind::map_begin:
      case record_kind::map_end: b = (sender << 32) | (r.b & 0xffffffffu); break;
      case record_kind::collective:
      case record_kind::manager_call:
      case record_kind::memory:
        if (r.kind == record_kind::memory && dashboard_) dashboard_->view().on_memory(names[r.a].in_tree, r.c);
        a = names[r.a].ours;
        break;
      default: continue;  // a child's process events come one by one (record_child_event)
    }
    auto ns = std::max<std::int64_t>(0, static_cast<std::int64_t>(r.ns) + offset);
    // A pool says in which process of the tree it runs.
    recorder_.record_at(static_cast<std::uint64_t>(ns), r.kind, a, b, r.c, r.d, r.kind == record_kind::pool_begin ? tree : text);
  }
}

}  // namespace fiber::detail
