#include "primitives/pool/held_results.hpp"

#include <cstring>

#include "fiber/error.hpp"

namespace fiber::detail {
namespace {
multipart copy_of(const multipart& m) {
  multipart out(m.size());
  for (std::size_t i = 0; i < m.size(); ++i) out[i].copy(const_cast<zmq::message_t&>(m[i]));
  return out;
}

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

bool held_results::begin(std::uint64_t id, std::uint32_t skip) {
  std::lock_guard lock(mutex_);
  if (orphaned_) return false;
  if (!tasks_.empty()) tasks_.back().task.running = false;
  tasks_.push_back({{id, skip, true}, {}});
  while (tasks_.size() > kept_) tasks_.pop_front();
  return true;
}

void held_results::orphan() {
  std::lock_guard lock(mutex_);
  orphaned_ = true;
}

void held_results::adopted() {
  std::lock_guard lock(mutex_);
  orphaned_ = false;
}

void held_results::keep(const multipart& m, bool last) {
  std::lock_guard lock(mutex_);
  if (tasks_.empty()) return;
  tasks_.back().messages.push_back(copy_of(m));
  if (last) tasks_.back().task.running = false;
}

std::string held_results::state(std::uint64_t pool_id) const {
  std::lock_guard lock(mutex_);
  std::string out;
  put(out, pool_id);
  put(out, static_cast<std::uint32_t>(tasks_.size()));
  for (auto& t : tasks_) {
    put(out, t.task.id);
    put(out, t.task.skip);
    put(out, static_cast<std::uint8_t>(t.task.running));
  }
  return out;
}

std::vector<multipart> held_results::copies() const {
  std::lock_guard lock(mutex_);
  std::vector<multipart> out;
  for (auto& t : tasks_)
    for (auto& m : t.messages) out.push_back(copy_of(m));
  return out;
}

held_state read_held_state(std::string_view in) {
  held_state s;
  s.pool_id = take<std::uint64_t>(in);
  auto n = take<std::uint32_t>(in);
  // Each task takes 13 bytes: a count past what the bytes hold is refused before anything grows.
  if (n > in.size() / 13) throw error(errc::protocol_error, "a worker says it holds more tasks than its word carries");
  for (std::uint32_t i = 0; i < n; ++i) {
    held_state::task t;
    t.id = take<std::uint64_t>(in);
    t.skip = take<std::uint32_t>(in);
    t.running = take<std::uint8_t>(in) != 0;
    s.tasks.push_back(t);
  }
  return s;
}

}  // namespace fiber::detail
