#include "primitives/pool/worker_reattach.hpp"

#include <unistd.h>

#include <boost/json.hpp>
#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <set>
#include <vector>

#include "core/log.hpp"
#include "core/worker_env.hpp"
#include "fiber/error.hpp"
#include "primitives/child_process.hpp"
#include "primitives/pool/held_results.hpp"
#include "primitives/pool/worker_set.hpp"
#include "runtime/links/reattach_dial.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {
namespace {
/// A worker's point answers from a thread of its own at once; one that does not within this is
/// taken for gone.
constexpr std::chrono::milliseconds patience{2000};
/// What a worker may say it holds (read once it proved the secret): held_results' tasks at most.
constexpr std::size_t state_limit = std::size_t{32} << 20;
/// The workers dialled side by side.
constexpr std::size_t dial_batch = 16;

/// Where and how the process a new child would be is to link: what `spec` would give it. A
/// worker on this host (`here`) watches the master's process too.
std::string record_for(const spawn_spec& spec, std::uint64_t pool_id, bool here) {
  boost::json::object r;
  for (auto& [k, v] : spec.env) {
    if (k == env_endpoint) r["endpoint"] = v;
    if (k == env_token) r["token"] = v;
    if (k == env_nonce) r["nonce"] = v;
  }
  r["credentials"] = spec.secret;
  r["pool"] = static_cast<std::int64_t>(pool_id);
  r["master_pid"] = here ? static_cast<std::int64_t>(::getpid()) : 0;
  return boost::json::serialize(r);
}
}  // namespace

namespace {
/// Takes up the worker `past` that answered `dial` as one of `workers`; false when it was told to
/// leave (the pool is full) or not started. Throws what stops it being taken up.
bool take_up(runtime& rt, durable_maps& journal, std::uint64_t pool_id, worker_set& workers, reattach_claims& claims,
             const map_journal::past_worker& past, reattach_dial& dial, bool full) {
  if (full) {  // a smaller pool this time: the others leave rather than wait
    dial.send({});
    return false;
  }
  auto held = read_held_state(dial.state());
  // On this host the kernel says which process dialled; elsewhere the engine's name for it is
  // what its last master journaled.
  int pid = dial.peer_pid();
  auto handle = pid > 0 ? std::to_string(pid) : past.handle;
  if (handle.empty()) throw error(errc::spawn_failed, "its last master did not write the engine's name for it");
  auto proc = workers.starter().make(workers.needs().now(), [&](const spawn_spec& spec) {
    auto job = rt.master().the_backend().adopt(handle);
    dial.send(record_for(spec, pool_id, pid > 0));
    return job;
  });
  auto rid = workers.start_worker(proc, false);
  if (rid.empty()) return false;
  claims.taken_up(rid);
  journal.worker(pid > 0 ? pid : past.pid, past.name, past.secret, handle);  // the next master finds it too
  for (auto& t : held.tasks) {
    // The worker says which chunk it ran, as its master told it: the journal may have lost that
    // master's record of it (its last journal_sync_ms), and may hold another master's task of
    // the same id. The claim holds only for a chunk made with the same identity. From a worker
    // not told (identity 0), the journal places it.
    std::optional<std::pair<std::uint32_t, std::uint64_t>> chunk;
    if (t.identity) chunk = std::pair{t.call, t.first};
    else chunk = journal.past_task(t.id);
    // A task nobody places runs again; one whose results the journal holds all is answered from
    // it, and what the worker holds of it is dropped on arrival.
    if (!chunk || journal.answered_whole(chunk->first, chunk->second)) continue;
    claims.add(rid, t.id, chunk->first, chunk->second, t.skip, t.identity);
  }
  logf(log_level::info, "pool ", pool_id, ": took up ", handle, " (", proc->name(), "), a worker of the last master, holding ",
       held.tasks.size(), " task(s)");
  return true;
}
}  // namespace

std::size_t take_up_workers(runtime& rt, durable_maps& journal, std::uint64_t pool_id, worker_set& workers,
                            reattach_claims& claims) {
  std::vector<map_journal::past_worker> past;
  std::set<std::string> named;
  for (auto& w : journal.past_workers())
    if (named.insert(w.name).second) past.push_back(w);  // journaled by each master it served
  std::size_t taken = 0;
  const auto target = static_cast<std::size_t>(std::max(0, workers.count().target));
  // Dialled a batch at a time, side by side: a worker that is gone with its host or pod costs
  // the patience once per batch, not once each; each batch is taken up before its points' own
  // patience for the record runs out.
  for (std::size_t at = 0; at < past.size(); at += dial_batch) {
    auto batch = std::min(dial_batch, past.size() - at);
    std::vector<std::future<std::unique_ptr<reattach_dial>>> dials;
    for (std::size_t i = 0; i < batch; ++i)
      dials.push_back(std::async(std::launch::async, [&w = past[at + i]] {
        return std::make_unique<reattach_dial>(w.name, w.secret, patience, state_limit);
      }));
    for (std::size_t i = 0; i < batch; ++i) {
      auto& w = past[at + i];
      try {
        auto dial = dials[i].get();
        taken += take_up(rt, journal, pool_id, workers, claims, w, *dial, taken >= target) ? 1 : 0;
      } catch (const std::exception& e) {
        logf(log_level::info, "pool ", pool_id, ": the last master's worker ", w.handle.empty() ? std::to_string(w.pid) : w.handle,
             " is not taken up (", e.what(), "); a new one takes its place");
      }
    }
  }
  return taken;
}

}  // namespace fiber::detail
