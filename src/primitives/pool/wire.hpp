// The pool's wire: what its master and workers say to each other, and how items are packed.
//
// Messages (see runtime/protocol.hpp), channel = pool id:
//   ready        worker -> master  aux = chunks it can take now (its credit)
//   task         master -> worker  request = task id, aux = items;
//                                  frames: function id (u64), the packed items, their large frames
//   result       worker -> master  request = task id, aux = credit it gives back;
//                                  frames: the packed results, their large frames
//   stop         master -> worker  finish what was sent, then exit
// The items are packed as fiber/detail/pool_items.hpp writes and reads them; a failed result
// item holds a core/remote_failure after its status byte.
#pragma once
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
}  // namespace pool_kind

/// Appends a result item with its status byte: the value `encode` writes, or, when it throws, the
/// failure it raised (what it appended is dropped).
template <class Encode>
void append_result(writer& results, Encode&& encode);

/// Appends a failed result item.
void append_failed_item(writer& results, const remote_failure& f);

/// The worker's side of a pool: a registered function each worker process runs (pool/worker.cpp).
void pool_worker_main(std::uint64_t pool_id, int credit, int maxtasks, std::uint64_t init_id,
                      std::vector<std::string> init_frames);

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
