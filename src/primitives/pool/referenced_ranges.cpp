#include "primitives/pool/referenced_ranges.hpp"

#include <cstring>
#include <vector>

#include "fiber/detail/shared_entry.hpp"

namespace fiber::detail {

std::shared_ptr<const shared_entry> referenced_ranges::share(const void* p, std::size_t n) {
  if (n < min_bytes) return nullptr;
  auto& held = entries_[{p, n}];
  // The address may hold other bytes by now (another object of the caller's, or an item's
  // temporary put where an earlier one was): the same bytes only are the same object.
  if (held && std::memcmp(held->blobs().front().data(), p, n) == 0) return held;
  auto copy = std::make_shared<const std::vector<std::byte>>(static_cast<const std::byte*>(p),
                                                             static_cast<const std::byte*>(p) + n);
  writer w(copy);
  w.range(copy->data(), copy->size());
  held = make_shared_entry(copy, typeid(shared_range_tag), std::move(w));
  return held;
}

}  // namespace fiber::detail
