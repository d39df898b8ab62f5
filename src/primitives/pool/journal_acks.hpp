// Which of its workers' results a durable run's pool has on disk, and telling each worker so. A
// worker holds the results of its tasks for a master that may take the run up (held_results)
// until its master says its journal holds them durably: results that reached a master in the
// last journal_sync_ms before it died are then not lost with it, but taken from the worker by the
// next master. The pool's master notes each of its tasks whose last results it journaled, at the
// journal's size then; when the journal is durable up to an offset, each worker is told the last
// of its tasks within it, and whether the results it held of the last masters' tasks are in too
// (all it held that this master takes were journaled before that task). No process, no loop: on
// fiber's loop thread.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <unordered_map>

namespace fiber::detail {

class journal_acks {
 public:
  /// Tells `worker` that its tasks up to `task` are durable, and the last masters' too when `old`.
  using send_fn = std::function<void(const std::string& worker, std::uint64_t task, bool old)>;
  explicit journal_acks(send_fn send) : send_(std::move(send)) {}

  /// Task `task` of `worker` has its last results in the journal, which was `end` bytes long
  /// after them; `old`: every result of the last masters' tasks that the worker held and this
  /// master takes was journaled before.
  void journaled(const std::string& worker, std::uint64_t task, std::uint64_t end, bool old);
  /// The journal is durable up to offset `upto`.
  void durable(std::uint64_t upto);
  /// `worker` ended.
  void forget(const std::string& worker) { waiting_.erase(worker); }

 private:
  struct entry {
    std::uint64_t end = 0, task = 0;
    bool old = false;
  };
  send_fn send_;
  std::unordered_map<std::string, std::deque<entry>> waiting_;
};

}  // namespace fiber::detail
