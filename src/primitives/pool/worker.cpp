// The worker's side of a pool: runs the initializer, asks for work, runs chunks, sends results.
#include <unistd.h>

#include <asio/post.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>

#include "core/frames_reader.hpp"
#include "core/log.hpp"
#include "core/worker_env.hpp"
#include "core/message_limit.hpp"
#include "core/remote_failure.hpp"
#include "fiber/context.hpp"
#include "fiber/registry.hpp"
#include "primitives/pool/drain_notice.hpp"
#include "primitives/pool/wire.hpp"
#include "primitives/pool/worker_rejoin.hpp"
#include "runtime/runtime.hpp"
#include "runtime/worker_exit.hpp"
#include "transport/shared_frames.hpp"
#include "transport/shared_server.hpp"

FIBER_REMOTE(fiber::detail::pool_worker_main);

namespace fiber::detail {
namespace {

/// The results of one task as they are made, sent in batches: a partial whenever the pool's interval
/// has passed or report_bytes are waiting (after every item when asked), the rest with the final
/// result. The clock is read only every `stride_` items, a stride that grows while items are tiny.
class chunk_run {
 public:
  chunk_run(runtime& rt, std::uint64_t pool_id, std::uint64_t task_id, std::chrono::milliseconds interval,
            bool report_each, bool careful, held_results* held)
      : rt_(rt),
        held_(held),
        pool_id_(pool_id),
        task_id_(task_id),
        interval_(interval),
        report_each_(report_each),
        last_sent_(clock::now()),
        started_(last_sent_),
        last_read_(last_sent_),
        careful_until_(careful ? last_sent_ + careful_intervals * interval_ : last_sent_) {}

  template <class Encode>
  void add(Encode&& encode) {
    results_.forget_shared();  // the master reads each result on its own
    auto head_before = results_.head().size();
    auto blobs_before = results_.blobs().size();
    append_result(results_, encode);
    bytes_ += results_.head().size() - head_before;
    for (auto b = blobs_before; b < results_.blobs().size(); ++b) bytes_ += results_.blobs()[b].size;
    ++items_;
  }

  bool due() {
    if (report_each_ || bytes_ >= report_bytes) return true;
    if (careful_until_ > last_read_) {
      last_read_ = clock::now();
      if (last_read_ < careful_until_) return true;
    }
    if (++since_read_ < stride_) return false;
    since_read_ = 0;
    auto now = clock::now();
    auto gap = now - std::exchange(last_read_, now);
    if (gap < interval_ / 64 && stride_ < 1024)
      stride_ *= 2;
    else if (gap > interval_ / 8 && stride_ > 1)
      stride_ /= 2;
    return now - last_sent_ >= interval_;
  }

  void send_partial() { send(pool_kind::partial, static_cast<std::uint32_t>(items_)); }
  bool has_results() const noexcept { return items_ != 0; }
  /// With how long the task ran here, for the run's recording (result_aux).
  void send_final(int credit) {
    auto ran = std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - started_);
    send(pool_kind::result, result_aux(credit, ran.count()));
  }

 private:
  using clock = std::chrono::steady_clock;

  void send(kind k, std::uint32_t aux) {
    if (auto over = message_limit_text("the results of a chunk", results_.total_size(), rt_.cfg().max_message_bytes,
                                       "use a smaller chunksize");
        !over.empty()) {
      // The master would drop the connection rather than take it: fail these items instead.
      results_ = writer();
      for (std::size_t i = 0; i < items_; ++i)
        append_failed_item(results_, remote_failure::fiber_error(errc::message_too_large, over));
    }
    auto m = make_message(k, {.channel = pool_id_, .request = task_id_, .aux = aux}, results_);
    if (held_) held_->keep(m, k == pool_kind::result);  // a durable run's: until a master has them
    rt_.worker().send_upstream(std::move(m));
    results_ = writer();
    items_ = bytes_ = 0;
    last_sent_ = clock::now();
  }

  runtime& rt_;
  held_results* held_;
  std::uint64_t pool_id_, task_id_;
  clock::duration interval_;  // in the clock's own unit: a sixty-fourth of it must not round to 0
  bool report_each_;
  writer results_;
  std::size_t items_ = 0, bytes_ = 0;
  std::size_t stride_ = 1, since_read_ = 0;
  clock::time_point last_sent_, started_, last_read_;  // started_: when the task was taken up
  clock::time_point careful_until_;
};

/// The worker's side of the shared objects sent apart: it takes in a task's objects, makes its
/// host's copy of one when asked (and says where it is), and waits for those that come later or
/// whose host copy it could not map, keeping the messages that arrive meanwhile for after.
class shared_intake {
 public:
  shared_intake(runtime& rt, std::uint64_t pool_id) : rt_(rt), pool_id_(pool_id) {}
  /// A master taking the run up knows the pool by another id.
  void renumber(std::uint64_t pool_id) { pool_id_ = pool_id; }

  /// The next service message: one kept while waiting, else the master's next.
  multipart next() {
    if (kept_.empty()) return rt_.worker().next_service_message();
    auto m = std::move(kept_.front());
    kept_.pop_front();
    return m;
  }

  /// A release or an object outside a task: true when `m` was one.
  bool aside(const header& h, multipart& m) {
    if (h.type == pool_kind::release) {
      for (std::size_t i = 1; i < m.size(); ++i) {
        if (m[i].size() != sizeof(std::uint64_t)) throw error(errc::malformed_message, "malformed pool release");
        std::uint64_t id;
        std::memcpy(&id, m[i].data(), sizeof id);
        release_shared(id);
      }
      return true;
    }
    if (h.type == pool_kind::hosted) {
      shared_received r;
      receive_shared(m, 1, 1, r);
      settle(r);
      return true;
    }
    return false;
  }

  /// Takes in the `count` objects at m[2] and waits until each is here; returns where the
  /// task's items start.
  std::size_t take(multipart& m, std::size_t count) {
    shared_received r;
    auto at = receive_shared(m, 2, count, r);
    settle(r);
    while (!missing_.empty()) {
      auto x = rt_.worker().next_service_message();
      auto hx = header_of(x, "the pool's master");
      if (!aside(hx, x)) kept_.push_back(std::move(x));  // a task or a stop: after this one
    }
    return at;
  }

 private:
  void settle(shared_received& r) {
    // Fetched from the worker the master named: then here whole, as if it had come in frames.
    for (auto& f : r.to_fetch) {
      try {
        auto got = fetch_shared({f.endpoint, f.public_key}, f.id, patience(),
                                {rt_.keys().client_public, rt_.keys().client_secret});
        shared_received whole;
        receive_shared(got, 0, 1, whole);
        r.to_report.push_back(f.id);
        if (f.host_it)
          if (auto e = find_shared(f.id)) r.to_host.push_back(std::move(e));
      } catch (const std::exception& ex) {
        logf(log_level::info, "asking the master for shared object ", f.id, " whole: ", ex.what());
        rt_.worker().send_upstream(make_message(pool_kind::need, {.channel = pool_id_}, as_pod(f.id)));
        missing_.push_back(f.id);
      }
    }
    // Here whole: copied into this host's memory when asked, and served to other hosts.
    for (auto& e : r.to_host) {
      if (std::find(r.to_report.begin(), r.to_report.end(), e->id()) == r.to_report.end()) r.to_report.push_back(e->id());
    }
    for (auto id : r.to_report) {
      hosted_at at{.id = id, .pid = static_cast<std::int32_t>(::getpid())};
      for (auto& e : r.to_host) {
        if (e->id() != id) continue;
        try {
          at.fd = e->host_copy();
        } catch (const std::exception& ex) {
          logf(log_level::warn, "cannot copy shared object ", id, " into this host's memory: ", ex.what());
        }
      }
      std::string server;
      // Served only where the job has CURVE keys (children that cross a network): its client key
      // is what the server admits.
      if (!rt_.keys().client_public.empty()) {
        try {
          auto& a = serve_shared_objects(rt_.keys().client_public);
          server = a.endpoint + "\n" + a.public_key;
        } catch (const std::exception& ex) {
          logf(log_level::warn, "cannot serve shared objects to other hosts: ", ex.what());
        }
      }
      if (server.empty())
        rt_.worker().send_upstream(make_message(pool_kind::hosted, {.channel = pool_id_}, as_pod(at)));
      else
        rt_.worker().send_upstream(make_message(pool_kind::hosted, {.channel = pool_id_}, as_pod(at), std::string_view(server)));
    }
    for (auto id : r.failed) {
      logf(log_level::info, "asking for shared object ", id, " whole: ", r.why_failed);
      rt_.worker().send_upstream(make_message(pool_kind::need, {.channel = pool_id_}, as_pod(id)));
    }
    missing_.insert(missing_.end(), r.later.begin(), r.later.end());
    missing_.insert(missing_.end(), r.failed.begin(), r.failed.end());
    std::erase_if(missing_, [](std::uint64_t id) { return find_shared(id) != nullptr; });
  }

  /// How long a fetch from another worker may take before the master is asked instead: a peer
  /// that ended leaves its connection retrying, silent.
  std::chrono::milliseconds patience() const {
    return std::chrono::milliseconds(std::max(60000, rt_.cfg().heartbeat_timeout_ms * 6));
  }

  runtime& rt_;
  std::uint64_t pool_id_;
  std::deque<multipart> kept_;
  std::vector<std::uint64_t> missing_;
};

/// The pool's initializer, when it has one (`init_id`), before the worker asks for work.
void run_initializer(std::uint64_t init_id, const std::vector<std::string>& init_frames) {
  if (!init_id) return;
  auto* entry = find_function(init_id);
  if (!entry) throw error(errc::not_registered, "pool initializer is not registered in this worker");
  frames_reader args(init_frames, 0);
  writer ignored;
  entry->invoke(args.get(), ignored);
}

/// Runs the task's items into `run`: false when the notice came before its last (the results so
/// far are sent; the rest is handed back).
bool run_items(const task_head& head, std::vector<packed_item>& items, chunk_run& run, drain_notice& notice) {
  auto* entry = find_function(head.function_id);
  shared_objects chunk_objects;  // the master wrote the chunk's items with one writer
  if (entry && head.shares_objects) {
    // Items reported before a death are not run again, but later items may refer to the
    // objects they carried.
    for (std::size_t i = 0; i < head.skip; ++i) {
      reader args(items[i].head, items[i].blobs);
      args.share_objects(chunk_objects);
      try {
        entry->read_args(args);
      } catch (const std::exception&) {
        // Its result was reported: a failure here was reported with it.
      }
    }
  }
  for (std::size_t i = head.skip, last = head.skip + head.run - 1; i <= last; ++i) {
    run.add([&](writer& out) {
      if (!entry)
        throw error(errc::not_registered, "function id " + std::to_string(head.function_id) + " is not registered in this worker");
      reader args(items[i].head, items[i].blobs);
      args.share_objects(chunk_objects);
      entry->invoke(args, out);
    });
    notice.item_done();
    if (i == last) break;
    if (notice.given()) {
      if (run.has_results()) run.send_partial();
      return false;
    }
    if (run.due()) run.send_partial();
  }
  return true;
}

/// The notice of this worker's planned end, armed: at the notice, a message on its loop wakes it
/// if it waits for work.
drain_notice& arm_drain_notice(const std::shared_ptr<runtime>& rt) {
  auto parent = env_or_empty(env_parent_pid);
  std::weak_ptr<runtime> weak = rt;
  return drain_notice::arm(std::chrono::milliseconds(rt->cfg().drain_notice_ms),
                           parent.empty() ? 0 : static_cast<pid_t>(std::stol(parent)),
                           env_or_empty("SLURM_JOB_ID").empty(), [weak] {
                             if (auto r = weak.lock())
                               asio::post(r->loop().executor(), [weak] {
                                 if (auto live = weak.lock())
                                   live->worker().push_service_message(make_message(pool_kind::draining, {}));
                               });
                           });
}

/// Tells the master that this worker had its notice: it starts a replacement, and what the
/// worker held (what it has not reported) runs again elsewhere, uncharged, once it has left.
void hand_back(runtime& rt, std::uint64_t pool_id) {
  rt.worker().send_upstream(make_message(pool_kind::draining, {.channel = pool_id}));
  set_clean_exit_code(exit_drained);
}

}  // namespace

void pool_worker_main(std::uint64_t pool_id, int credit, int maxtasks, std::int64_t report_ms, std::uint64_t init_id,
                      const std::vector<std::string>& init_frames) {
  const auto report_interval = std::chrono::milliseconds(report_ms);
  auto rt = context::default_context().runtime();
  run_initializer(init_id, init_frames);
  // With maxtasksperchild, never ask for more chunks than this worker will run.
  int granted = maxtasks ? std::min(credit, maxtasks) : credit;
  const int first_credit = granted;
  auto rejoin = worker_rejoin::arm(*rt, pool_id);
  rt->worker().send_upstream(make_message(pool_kind::ready, {.channel = pool_id, .aux = static_cast<std::uint32_t>(granted)}));
  int done = 0;
  auto& notice = arm_drain_notice(rt);
  // A task's last results, with the credit back unless this worker is about to retire (or
  // leave: its notice came); true when it retires now (maxtasksperchild: the master starts a
  // replacement).
  auto finish = [&](chunk_run& run) {
    ++done;
    int give_back = (!maxtasks || granted < maxtasks) && !notice.given() ? 1 : 0;
    granted += give_back;
    run.send_final(give_back);
    return maxtasks && done >= maxtasks;
  };
  shared_intake objects(*rt, pool_id);
  for (;;) {
    if (notice.given()) return hand_back(*rt, pool_id);
    auto m = objects.next();
    auto h = header_of(m, "the pool's master");
    if (h.type == pool_kind::stop) return;
    if (notice.given()) return hand_back(*rt, pool_id);  // what it took is the master's again
    if (h.type == pool_kind::draining) continue;  // a wake-up, from before the notice was handled
    if (objects.aside(h, m)) continue;
    if (h.type == pool_kind::journaled) {  // what it held of those tasks can go
      if (rejoin) rejoin->held().journaled(h.request, h.aux != 0);
      continue;
    }
    if (h.type == pool_kind::rejoined && rejoin) {  // a master taking the run up linked it again
      pool_id = rejoin->rejoined(h, first_credit);
      objects.renumber(pool_id);
      continue;
    }
    if (m.size() < 3 || m[1].size() != sizeof(task_head)) throw error(errc::malformed_message, "malformed pool task");
    task_head head;
    std::memcpy(&head, m[1].data(), sizeof head);
    if (rejoin && !rejoin->held().begin(h.request, head.skip, head.call, head.chunk_first, head.identity))
      continue;  // its master is gone
    chunk_run run(*rt, pool_id, h.request, report_interval, head.report_each != 0, head.careful != 0,
                  rejoin ? &rejoin->held() : nullptr);
    // The shared objects this worker lacks come first: the items refer to them by id. When
    // they cannot be taken in, the items fail with why.
    std::size_t at = 2;
    try {
      at = objects.take(m, head.objects);
    } catch (const std::exception&) {
      auto why = std::current_exception();
      for (std::uint32_t i = 0; i < head.run; ++i) run.add([&](writer&) { std::rethrow_exception(why); });
      if (finish(run)) return;
      continue;
    }
    auto items = unpack(m, at, static_cast<std::size_t>(h.aux), false);
    if (head.run == 0 || std::size_t(head.skip) + head.run > items.size())
      throw error(errc::malformed_message, "malformed pool task: its range is outside its items");
    notice.task_begins(std::chrono::seconds(head.estimate_s));
    bool whole = run_items(head, items, run, notice);
    notice.task_ends();
    if (!whole) return hand_back(*rt, pool_id);
    if (finish(run)) return;
  }
}

}  // namespace fiber::detail
