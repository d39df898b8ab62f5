#include "primitives/pool/held_results.hpp"

#include <algorithm>
#include <cstring>

#include "fiber/error.hpp"

namespace fiber::detail {
namespace {

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
T take(std::string_view& in) {
  if (in.size() < sizeof(T)) throw error(errc::protocol_error, "a worker's word of what it holds is cut short");
  T v;
  std::memcpy(&v, in.data(), sizeof v);
  in.remove_prefix(sizeof v);
  return v;
}
}  // namespace

bool held_results::begin(std::uint64_t id, std::uint32_t skip, std::uint32_t call, std::uint64_t first,
                         std::uint64_t identity) {
  std::lock_guard lock(mutex_);
  if (orphaned_) return false;
  if (!tasks_.empty()) tasks_.back().task.running = false;
  // A few of those the master's journal holds go at each task, not thousands at its word: what
  // they free is what the next tasks take (the allocator's cache stays warm, its heap whole).
  prune(8);
  tasks_.push_back({{id, skip, true, call, first, identity}, master_, log_.end(), log_.end(), 0});
  trim();
  return true;
}

bool held_results::journaled_already(const task_messages& t) const {
  return !t.task.running && (t.master < master_ ? old_journaled_ : t.task.id <= journaled_);
}

void held_results::prune(std::size_t most) {
  for (; most && !tasks_.empty() && journaled_already(tasks_.front()); --most) pop_oldest();
}

void held_results::pop_oldest() {
  bytes_ -= tasks_.front().bytes;
  tasks_.pop_front();
  log_.drop_before(tasks_.empty() ? log_.end() : tasks_.front().from);
}

void held_results::trim() {
  while ((bytes_ > bound_ || tasks_.size() > most_tasks) && tasks_.size() > 1 && !tasks_.front().task.running)
    pop_oldest();
}

void held_results::journaled(std::uint64_t task, bool old) {
  std::lock_guard lock(mutex_);
  journaled_ = std::max(journaled_, task);
  old_journaled_ = old_journaled_ || old;
}

void held_results::orphan() {
  std::lock_guard lock(mutex_);
  orphaned_ = true;
}

void held_results::adopted() {
  std::lock_guard lock(mutex_);
  orphaned_ = false;
  prune(tasks_.size());  // what the last master had on disk goes before its numbers do
  ++master_;
  journaled_ = 0;  // the new master's tasks are numbered anew
  old_journaled_ = false;
}

void held_results::keep(const multipart& m, bool last) {
  std::lock_guard lock(mutex_);
  if (tasks_.empty()) return;
  auto& t = tasks_.back();
  log_.append(m);
  t.to = log_.end();
  std::size_t n = 0;
  for (auto& frame : m) n += frame.size();
  t.bytes += n;
  bytes_ += n;
  if (last) t.task.running = false;
  trim();
}

std::string held_results::state(std::uint64_t pool_id) const {
  std::lock_guard lock(mutex_);
  std::string out;
  put(out, pool_id);
  auto held = std::count_if(tasks_.begin(), tasks_.end(), [&](auto& t) { return !journaled_already(t); });
  put(out, static_cast<std::uint32_t>(held));
  for (auto& t : tasks_) {
    if (journaled_already(t)) continue;
    put(out, t.task.id);
    put(out, t.task.skip);
    put(out, static_cast<std::uint8_t>(t.task.running));
    put(out, t.task.call);
    put(out, t.task.first);
    put(out, t.task.identity);
  }
  return out;
}

std::vector<multipart> held_results::copies() const {
  std::lock_guard lock(mutex_);
  std::vector<multipart> out;
  for (auto& t : tasks_)
    if (!journaled_already(t))
      for (auto& m : log_.copies(t.from, t.to)) out.push_back(std::move(m));
  return out;
}

held_state read_held_state(std::string_view in) {
  held_state s;
  s.pool_id = take<std::uint64_t>(in);
  auto n = take<std::uint32_t>(in);
  // Each task takes 33 bytes: a count past what the bytes hold is refused before anything grows.
  if (n > in.size() / 33) throw error(errc::protocol_error, "a worker says it holds more tasks than its word carries");
  for (std::uint32_t i = 0; i < n; ++i) {
    held_state::task t;
    t.id = take<std::uint64_t>(in);
    t.skip = take<std::uint32_t>(in);
    t.running = take<std::uint8_t>(in) != 0;
    t.call = take<std::uint32_t>(in);
    t.first = take<std::uint64_t>(in);
    t.identity = take<std::uint64_t>(in);
    s.tasks.push_back(t);
  }
  return s;
}

}  // namespace fiber::detail
