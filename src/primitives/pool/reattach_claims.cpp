#include "primitives/pool/reattach_claims.hpp"

namespace fiber::detail {

void reattach_claims::add(const std::string& worker, std::uint64_t old_task, std::uint32_t call, std::uint64_t first,
                          std::uint64_t skip, std::uint64_t identity) {
  speaking_.insert(worker);
  claims_[{worker, old_task}] = {call, first, skip, 0, identity, {}};
  by_chunk_[{call, first}] = {worker, old_task};
}

std::optional<std::string> reattach_claims::claim(std::uint32_t call, std::uint64_t first, std::uint64_t task,
                                                  std::uint64_t identity) {
  auto it = by_chunk_.find({call, first});
  if (it == by_chunk_.end()) return std::nullopt;
  auto k = it->second;
  by_chunk_.erase(it);
  auto c = claims_.find(k);
  if (c == claims_.end()) return std::nullopt;
  if (c->second.identity && identity && c->second.identity != identity) {
    claims_.erase(c);  // its messages are read as of no claim: the chunk runs again
    return std::nullopt;
  }
  c->second.new_task = task;
  return k.first;
}

reattach_claims::reading reattach_claims::read(const std::string& worker, std::uint64_t old_task, bool final,
                                               std::size_t items, std::optional<std::pair<std::size_t, std::size_t>> left) {
  auto it = claims_.find({worker, old_task});
  if (it == claims_.end()) return {};
  auto& c = it->second;
  if (!c.new_task) return {reading::wait};
  if (!left) {  // the task is done (the journal had it all) or no longer the worker's
    if (final) claims_.erase(it);
    return {reading::drop};
  }
  auto [begin, end] = *left;
  auto from = c.next;
  auto count = final ? (end > from ? end - from : 0) : items;
  c.next = from + count;
  reading r{reading::deliver, c.new_task, 0};
  if (from > begin) {
    r.what = reading::gap;
    claims_.erase(it);
    return r;
  }
  if (final) claims_.erase(it);
  if (from + count <= begin && !final) return {reading::drop};
  r.skip = begin - from;
  return r;
}

std::uint64_t reattach_claims::task_of(const std::string& worker, std::uint64_t old_task) const {
  auto it = claims_.find({worker, old_task});
  return it == claims_.end() ? 0 : it->second.new_task;
}

void reattach_claims::keep(const std::string& worker, std::uint64_t old_task, multipart m) {
  if (auto it = claims_.find({worker, old_task}); it != claims_.end()) it->second.kept.push_back(std::move(m));
}

std::vector<multipart> reattach_claims::waiting(std::uint64_t task) {
  for (auto& [k, c] : claims_)
    if (c.new_task == task) return std::exchange(c.kept, {});
  return {};
}

void reattach_claims::forget(const std::string& worker) {
  speaking_.erase(worker);
  for (auto it = claims_.begin(); it != claims_.end();) {
    if (it->first.first == worker) {
      by_chunk_.erase({it->second.call, it->second.first});
      it = claims_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace fiber::detail
