// What a durable run's pools write of their maps, and what a master started again reads back:
// each map's function (its identity beside its place, the pool's and the call's numbers), the
// identity of its inputs chunk by chunk (how many items, a hash of their packed bytes), each
// result as it arrives, and the map's end. A map taken up again must be the same map: another
// function, or inputs that hash otherwise, is an error that names both, never a silent mix of two
// runs' results. The format is core/run_journal's; this part gives its records their meaning. No
// process, no loop.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/run_journal.hpp"

namespace fiber::detail {

class map_journal {
 public:
  // 3 was a record of results item by item, no longer written: a master reading one runs its items
  // again.
  enum kind : std::uint8_t { map_begin = 1, map_chunk = 2, map_end = 4, pool_worker = 5, map_results = 6 };

  /// What the last master wrote of one map.
  struct past_map {
    std::string function;
    std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> chunks;  // first item -> (count, hash)
    std::map<std::uint64_t, std::uint64_t> chunk_tasks;                        // first item -> its task's id
    std::map<std::uint64_t, std::string> results;                             // item -> its result's bytes
    bool ended = false;
  };

  /// `past`: the journal as the last master left it (empty for a new run); `out`: where this
  /// master appends (it outlives this part).
  map_journal(const journal_contents& past, journal_writer& out);

  /// What the last master wrote of map `call` of pool `pool`, if anything.
  const past_map* past(std::uint32_t pool, std::uint32_t call) const;
  /// A worker of a durable run's pool, where a master taking the run up may find it again
  /// (runtime/links/reattach_point): its pid, its point's name and secret, and the engine's name
  /// for it (job::handle; empty from a master that did not write it).
  struct past_worker {
    std::int64_t pid = 0;
    std::string name, secret, handle;
  };
  /// The workers the last masters wrote for pool `pool`, in the order they came.
  std::vector<past_worker> past_workers(std::uint32_t pool) const;
  /// Which chunk the last master's task `task` of pool `pool` ran: (call, first item).
  std::optional<std::pair<std::uint32_t, std::uint64_t>> past_task(std::uint32_t pool, std::uint64_t task) const;

  /// A map begins with `function`. Throws fiber::error(config_error) naming both functions when the
  /// journal has this map with another.
  void begin(std::uint32_t pool, std::uint32_t call, std::string_view function);
  /// Its items [first, first + count) were packed into bytes hashing to `hash`, for task `task`.
  /// Throws fiber::error(config_error) naming the map and the items when the journal has other
  /// inputs there.
  void chunk(std::uint32_t pool, std::uint32_t call, std::uint64_t first, std::uint64_t count, std::uint64_t hash,
             std::uint64_t task = 0);
  /// A worker of pool `pool` can be found again at reattach point `name` with `secret`, and
  /// taken up as the engine's `handle`.
  void worker(std::uint32_t pool, std::int64_t pid, std::string_view name, std::string_view secret,
              std::string_view handle);
  /// A worker's message of results arrived: `frames` as the worker sent them (its packed items,
  /// then their large frames: fiber/detail/pool_items.hpp), the chunk's items [skip, skip + count)
  /// being the map's items [first, first + count). One record, written from the frames (`keep`
  /// holds them) or copied once when small: the master reads no item to journal it, and the
  /// reader unpacks them as the master does. Throws fiber::error(journal_failed) naming
  /// journal_max_bytes when it would not fit.
  void results(std::uint32_t pool, std::uint32_t call, std::uint64_t first, std::uint32_t skip, std::uint32_t count,
               std::span<const std::string_view> frames, std::shared_ptr<const void> keep = {});
  /// How many results a record holds (0 for a record of another kind, or one it cannot read).
  static std::size_t results_in(const journal_record& r);
  /// One result as past_map::results holds it: [u32 large frames][u64 head size][head], then
  /// [u64 size][bytes] for each large frame.
  static std::string packed_result(std::span<const std::byte> head, std::span<const std::span<const std::byte>> blobs);
  /// Every item of the map was delivered.
  void end(std::uint32_t pool, std::uint32_t call);
  /// The journal's size, what was appended included.
  std::uint64_t bytes() const noexcept { return out_.bytes(); }

 private:
  using key = std::pair<std::uint32_t, std::uint32_t>;
  std::string name_of(const key& k) const;

  std::map<key, past_map> past_;
  std::map<std::uint32_t, std::vector<past_worker>> workers_;
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::pair<std::uint32_t, std::uint64_t>> tasks_;  // (pool, task) -> (call, first)
  journal_writer& out_;
  std::string sizes_;                   // a message's record head and frame sizes (reused)
  std::vector<std::string_view> parts_;  // ... and its pieces (reused)
};

/// A hash of a chunk's packed bytes, chained through `seed` (XXH3-64: stable across runs, builds
/// and hosts, and a tenth of a nanosecond a byte).
std::uint64_t chunk_hash(std::string_view bytes, std::uint64_t seed = 0);

}  // namespace fiber::detail
