#include "backend/local/memory_watch.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "fiber/error.hpp"

namespace fiber::detail {

memory_watch::memory_watch(asio::io_context& io, std::chrono::milliseconds poll) : timer_(io), poll_(poll) {
  if (poll.count() <= 0)
    throw error(errc::config_error, "memory_poll_ms must be at least 1 (how often a child's memory is read), got " +
                                        std::to_string(poll.count()));
}

memory_watch::~memory_watch() {
  entries_.clear();
  timer_.cancel();
}

std::uint64_t memory_watch::watch(int pid, std::uint64_t limit_mb, over_fn over) {
  auto id = next_id_++;
  entries_.emplace(id, entry{pid, limit_mb << 20, std::move(over)});
  arm();
  return id;
}

void memory_watch::set_limit(std::uint64_t id, std::uint64_t limit_mb) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  it->second.limit_bytes = limit_mb << 20;
  arm();
}

void memory_watch::unwatch(std::uint64_t id) { entries_.erase(id); }

std::size_t memory_watch::limited() const noexcept {
  return static_cast<std::size_t>(
      std::count_if(entries_.begin(), entries_.end(), [](const auto& e) { return e.second.limit_bytes > 0; }));
}

void memory_watch::arm() {
  if (armed_ || limited() == 0) return;
  armed_ = true;
  timer_.expires_after(poll_);
  timer_.async_wait([this](std::error_code ec) {
    if (ec) return;  // cancelled: the watch is going
    armed_ = false;
    poll_all();
    arm();
  });
}

void memory_watch::poll_all() {
  // Told after the pass: an owner that stops its process may unwatch others meanwhile.
  std::vector<std::pair<over_fn, memory_use>> over;
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto& e = it->second;
    if (e.limit_bytes == 0) {
      ++it;
      continue;
    }
    auto seen = process_memory(e.pid);
    if (seen.resident <= e.limit_bytes) {
      ++it;
      continue;
    }
    seen.peak = std::max(seen.peak, seen.resident);
    over.emplace_back(std::move(e.over), seen);
    it = entries_.erase(it);
  }
  for (auto& [f, seen] : over) f(seen);
}

}  // namespace fiber::detail
