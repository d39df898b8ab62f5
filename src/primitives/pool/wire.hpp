// The pool's wire: what its master and workers say to each other, and how items are packed.
//
// Messages (see runtime/protocol.hpp), channel = pool id:
//   ready        worker -> master  aux = chunks it can take now (its credit)
//   task         master -> worker  request = task id, aux = packed items;
//                                  frames: task_head, the fiber::shared objects the items
//                                  refer to that the worker lacks (task_head::objects of them,
//                                  transport/shared_frames.hpp), the packed items, their large
//                                  frames
//   partial      worker -> master  request = task id, aux = items in it: the results of the
//                                  task's next items, while it runs (a death loses only the rest)
//   result       worker -> master  request = task id, aux = credit it gives back and how long
//                                  the task ran on the worker (result_aux);
//                                  frames: the packed results of the task's items not yet sent
//                                  in a partial, their large frames
//   stop         master -> worker  finish what was sent, then exit
//   release      master -> worker  frames: the ids (u64) of shared objects the worker may let
//                                  go: their last handle in the master went
//   hosted       worker -> master  frame: hosted_at: where the worker put its host's copy of an
//                                  object it got whole with `report` (fd -1: none made); and,
//                                  when it serves it to other hosts, "endpoint\npublic key"
//                                  (transport/shared_server.hpp)
//                master -> worker  frames: one shared object the worker waits for (it was
//                                  announced `later`, or it could not map a host copy): a host
//                                  copy to map, the object whole, or a worker to fetch it from
//   need         worker -> master  frame: the id (u64) of an object whose host copy the worker
//                                  could not map, or could not fetch: the master sends it whole
//   reattach_at  worker -> master  frames: the name of the worker's reattach point and its secret
//                                  (a durable run's worker on the master's host): journaled, so
//                                  that a master taking the run up can link it again
//   rejoined     (the worker's own) its service loop hears that a master taking the run up linked
//                                  it again: channel = that master's id of the pool
// The items are packed as fiber/detail/pool_items.hpp writes and reads them; a failed result
// item holds a core/remote_failure after its status byte.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/remote_failure.hpp"
#include "fiber/codec.hpp"
#include "fiber/detail/pool_items.hpp"
#include "runtime/protocol.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {

/// The pool's message kinds (runtime/protocol.hpp routes them by the pool's id, the channel).
namespace pool_kind {
inline constexpr kind ready = service_kind<service_block::pool, 0>();
inline constexpr kind task = service_kind<service_block::pool, 1>();
inline constexpr kind result = service_kind<service_block::pool, 2>();
inline constexpr kind stop = service_kind<service_block::pool, 3>();
inline constexpr kind partial = service_kind<service_block::pool, 4>();
inline constexpr kind release = service_kind<service_block::pool, 5>();
inline constexpr kind hosted = service_kind<service_block::pool, 6>();
inline constexpr kind need = service_kind<service_block::pool, 7>();
inline constexpr kind reattach_at = service_kind<service_block::pool_more, 0>();
inline constexpr kind rejoined = service_kind<service_block::pool_more, 1>();
/// Worker to master: it has notice of its planned end and hands back what it holds (it sends
/// nothing more and exits). In the worker, also what wakes its loop at the notice.
inline constexpr kind draining = service_kind<service_block::pool_more, 2>();
/// Master to worker, in a durable run: its journal on disk holds the results of the worker's
/// tasks up to `request` (0: none) and, with `aux` 1, those of the last masters' tasks it held
/// when taken up; what the worker held of them for a master taking the run up can go.
inline constexpr kind journaled = service_kind<service_block::pool_more, 3>();
}  // namespace pool_kind

/// A result's aux: the credit the worker gives back (0 or 1: the low bit) and how long the task
/// ran on it, in µs (the rest; saturated at 2^31 - 1, 35 minutes). The time rides on a message
/// the master takes anyway, so the run's recording times each task as its worker ran it at no
/// cost, and a worker killed later loses none of it.
constexpr std::uint32_t result_aux(int credit, std::int64_t ran_us) {
  constexpr std::int64_t most = (std::int64_t{1} << 31) - 1;
  auto us = ran_us < 0 ? 0 : ran_us > most ? most : ran_us;
  return static_cast<std::uint32_t>(credit & 1) | (static_cast<std::uint32_t>(us) << 1);
}
constexpr int credit_of_result(std::uint32_t aux) { return static_cast<int>(aux & 1u); }
constexpr std::uint64_t ran_us_of_result(std::uint32_t aux) { return aux >> 1; }

/// A task's first frame. A task runs `run` of the packed items after the first `skip`: a chunk
/// whose worker died goes out again with the items already reported skipped (read for the
/// objects later items share, not run).
struct task_head {
  std::uint64_t function_id = 0;
  std::uint32_t skip = 0;
  std::uint32_t run = 0;
  std::uint8_t report_each = 0;     // 1: a partial after every item (under a timeout)
  std::uint8_t shares_objects = 0;  // 1: an item may refer to an object an earlier one carried
  /// 1: the rest of a chunk whose worker died: a partial after every item for its first
  /// careful_intervals report intervals. A worker reaches the item that killed the last one
  /// within the interval it had not reported yet, so the next death names its item; after that,
  /// batches again (a message per item for a whole 62,500-item remainder cost 2.3x).
  std::uint8_t careful = 0;
  std::uint16_t objects = 0;  // shared objects attached before the items
  /// How long an item takes, in seconds rounded up (at most 65535); 0: the worker learns it
  /// (task_estimate: whether the item running at a notice of the worker's end fits in it).
  std::uint16_t estimate_s = 0;
  /// Which chunk this is, in a durable run: the call's number, its first item, and its identity
  /// (durable_maps::identity; 0 outside a durable run). A worker holding the task's results for
  /// a master taking the run up says them back, so that its results are taken even when the
  /// journal lost the chunk with its master, and only for the same chunk.
  std::uint32_t call = 0;
  std::uint64_t chunk_first = 0;
  std::uint64_t identity = 0;
};
static_assert(sizeof(task_head) == 48);

/// Where a worker put its host's copy of a shared object (pool_kind::hosted).
struct hosted_at {
  std::uint64_t id = 0;
  std::int32_t pid = 0;
  std::int32_t fd = -1;
};
static_assert(sizeof(hosted_at) == 16);

/// A worker sends the results it has once pool_options::report_interval has passed since it last
/// did, or once they reach report_bytes: a message every few ms, not one per item, however small
/// the items.
inline constexpr std::size_t report_bytes = std::size_t(1) << 20;
inline constexpr int careful_intervals = 2;

/// Appends a result item with its status byte: the value `encode` writes, or, when it throws, the
/// failure it raised (what it appended is dropped).
template <class Encode>
void append_result(writer& results, Encode&& encode);

/// Appends a failed result item.
void append_failed_item(writer& results, const remote_failure& f);

/// The worker's side of a pool: a registered function each worker process runs (pool/worker.cpp).
void pool_worker_main(std::uint64_t pool_id, int credit, int maxtasks, std::int64_t report_ms, std::uint64_t init_id,
                      const std::vector<std::string>& init_frames);

// ---- implementation

template <class Encode>
void append_result(writer& results, Encode&& encode) {
  auto status_at = results.head().size();
  auto blobs_at = results.blobs().size();
  results.head().push_back(item_value);
  try {
    item_writer(results).add(encode);
  } catch (...) {
    results.head().resize(status_at);
    results.blobs().resize(blobs_at);
    append_failed_item(results, remote_failure::of_current_exception());
  }
}

}  // namespace fiber::detail
