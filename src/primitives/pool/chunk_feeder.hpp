// The calls whose input has not run out, and the chunks made from them: each chunk packs the next
// items of the first call that has some to give (a vector every item holds by reference travels
// once a chunk, a fiber::shared object once a worker), published to the shared cache, and checked
// against the message limit before it is queued. A chunk over the limit fails its items here: a
// worker would drop the connection. On fiber's loop thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <vector>

#include "primitives/pool/item_delivery.hpp"
#include "primitives/pool/pool_submission.hpp"

namespace fiber::detail {

class chunk_feeder {
 public:
  explicit chunk_feeder(item_delivery& delivery) : delivery_(delivery) {}

  void add(std::shared_ptr<pool_submission> sub) { reading_.push_back(std::move(sub)); }
  /// The fiber::shared objects the chunks refer to: their bound together (shared_cache_bytes),
  /// and whether workers map them from this host's memory (else each goes in a task's message,
  /// and counts against max_message_bytes).
  void shared_limits(std::uint64_t bound, bool host_memory) {
    shared_bound_ = bound;
    shared_in_host_memory_ = host_memory;
  }

  /// A durable run's pool: each chunk is checked against the journal, and its leading items
  /// whose results the journal holds are answered from it and not run; the delivery journals
  /// the results that arrive.
  void journal(durable_maps* j) noexcept {
    journal_ = j;
    delivery_.journal(j);
  }

  /// Told each call's end (item_delivery::on_end).
  void on_end(std::function<void(const pool_submission&)> f) { delivery_.on_end(std::move(f)); }

  /// Appends chunks to `queue` until it holds `window` (or no input is left, or every sink wants
  /// no more for now), each a task numbered from `next_id`.
  void feed(std::deque<pool_task>& queue, std::size_t window, std::size_t max_message_bytes, std::uint64_t& next_id);

  /// Whether a call's input has not run out.
  bool reading() const { return !reading_.empty(); }
  /// Those whose input has not run out, that `which` picks, out of this feeder and into `out`
  /// (each once).
  void take_where(const std::function<bool(const pool_submission&)>& which,
                  std::vector<std::shared_ptr<pool_submission>>& out);
  /// `sub`'s input is read no further (its caller has its answer).
  void drop(pool_submission& sub);

 private:
  /// Why `chunk` cannot be sent (its shared objects over their bound, or the whole over
  /// `max_message_bytes`); null when it can.
  std::exception_ptr check(writer& chunk, std::size_t max_message_bytes) const;

  /// How many of the chunk's first items the journal answered (`count`: the chunk is done);
  /// fails them all when the journal has other inputs for them.
  /// `identity`: the chunk's, as the journal knows it.
  std::size_t replay(pool_submission& sub, std::size_t first, std::size_t count, const writer& chunk, std::uint64_t task,
                     std::uint64_t& identity);

  item_delivery& delivery_;
  durable_maps* journal_ = nullptr;
  std::list<std::shared_ptr<pool_submission>> reading_;
  std::uint64_t shared_bound_ = 0;
  bool shared_in_host_memory_ = false;
};

}  // namespace fiber::detail
