#include "primitives/pool/journal_acks.hpp"

#include <iterator>
#include <optional>

namespace fiber::detail {

void journal_acks::journaled(const std::string& worker, std::uint64_t task, std::uint64_t end, bool old) {
  waiting_[worker].push_back({end, task, old});
}

void journal_acks::durable(std::uint64_t upto) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto& q = it->second;
    std::optional<entry> last;
    while (!q.empty() && q.front().end <= upto) {
      last = q.front();
      q.pop_front();
    }
    // Told once a sync for its newest task within it: that one says the rest.
    auto worker = it->first;
    it = q.empty() ? waiting_.erase(it) : std::next(it);
    if (last) send_(worker, last->task, last->old);
  }
}

}  // namespace fiber::detail
