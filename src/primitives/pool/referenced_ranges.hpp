// The large ranges that one pool call's items hold by reference (a std::cref of a vector in
// every item of a starmap): each becomes a shared object of its own, made once on the first
// chunk that holds it, which the pool then sends to each worker once, as it sends a
// fiber::shared. Without it every chunk carried its own copy, and the master held them all.
// On fiber's loop thread.
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <utility>

#include "fiber/encoding.hpp"

namespace fiber::detail {

class referenced_ranges final : public range_sharer {
 public:
  /// Below this, a range stays in its chunks (once per chunk, writer::share_ranges): an object
  /// of its own costs each worker a delivery, a map of host memory and a release, which a
  /// smaller copy through the socket does not repay (the pool's host_memory_min_bytes).
  static constexpr std::size_t min_bytes = std::size_t(1) << 20;

  /// The object carrying the `n` bytes at `p`: the one made before for these bytes at this
  /// address, or a new one holding a copy of them (the caller's object may go before a chunk
  /// that was sent, when a call fails). Null below min_bytes.
  std::shared_ptr<const shared_entry> share(const void* p, std::size_t n) override;
  /// The objects this call made and still holds.
  std::size_t size() const noexcept { return entries_.size(); }

 private:
  std::map<std::pair<const void*, std::size_t>, std::shared_ptr<const shared_entry>> entries_;
};

}  // namespace fiber::detail
