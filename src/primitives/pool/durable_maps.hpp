// What one pool of a durable run journals of its calls, and what it takes back from the journal
// of the master that ran before it: each call begins with its function's name, each chunk's items
// are checked against the inputs the journal holds for them (so that two runs' results never mix
// unseen), the leading items of a chunk whose results the journal holds are answered from it and
// not run, and each result that arrives is journaled. Calls are known by the pool's number and
// their own (the Nth pool of the program, its Mth call), which is what stays the same when the
// same program runs again. No process, no loop: the pool's feeder and delivery call it on fiber's
// loop thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fiber/detail/message.hpp"
#include "primitives/pool/map_journal.hpp"
#include "primitives/pool/pool_submission.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber {
class writer;
}

namespace fiber::detail {

class durable_maps {
 public:
  /// Pool number `pool` journals through `journal`; `appended` is told after each record.
  durable_maps(map_journal& journal, std::uint32_t pool, std::function<void()> appended);

  /// `sub` begins, running `function`. Throws fiber::error(config_error) naming both functions
  /// when the journal has this call with another.
  void begin(const pool_submission& sub, std::string_view function);
  /// Items [first, first + count) of `sub` were packed into `chunk`: checked against the journal
  /// (fiber::error(config_error) naming the items when they differ) and noted. Returns how many of
  /// them, from the first, have their result in the journal.
  std::size_t chunk(const pool_submission& sub, std::size_t first, std::size_t count, const writer& chunk,
                    std::uint64_t task = 0) {
    return this->chunk(sub, first, count, identity(chunk), task);
  }
  /// The same, for a chunk whose identity() is `identity`.
  std::size_t chunk(const pool_submission& sub, std::size_t first, std::size_t count, std::uint64_t identity,
                    std::uint64_t task = 0);
  /// The pool's worker `pid` can be found again at reattach point `name` with `secret`, and taken
  /// up as the engine's `handle` (job::handle).
  void worker(std::int64_t pid, std::string_view name, std::string_view secret, std::string_view handle);
  /// The workers the journal holds for this pool, and the chunk (call, first item) a task of the
  /// last master's ran.
  std::vector<map_journal::past_worker> past_workers() const { return journal_.past_workers(pool_); }
  std::optional<std::pair<std::uint32_t, std::uint64_t>> past_task(std::uint64_t task) const {
    return journal_.past_task(pool_, task);
  }
  /// Whether the journal holds the result of every item of call `call`'s chunk at `first`: such
  /// a chunk is answered from it whole, and no worker's claim on it is worth keeping.
  bool answered_whole(std::uint32_t call, std::uint64_t first) const;
  /// Item `index`'s journaled result, as the message it arrived in.
  message past_result(const pool_submission& sub, std::size_t index) const;
  /// A worker's message of results arrived (`payload`: its packed items and their large frames),
  /// its entries [skip, skip + count) being items [first, first + count) of `sub`: journaled as
  /// it came, one record. An error (the journal at journal_max_bytes) when it cannot be, for its
  /// items to fail with.
  std::exception_ptr results(const pool_submission& sub, std::size_t first, std::size_t skip, std::size_t count,
                             const std::shared_ptr<multipart>& payload) noexcept;
  /// Every item of `sub` was delivered.
  void end(const pool_submission& sub) noexcept;
  /// The journal's size now, what was appended included (durable_run says how far it is durable).
  std::uint64_t journal_end() const noexcept { return journal_.bytes(); }

  /// The bytes a result is journaled as (its head and its large frames), and back.
  static std::string pack_result(const message& m);
  static message unpack_result(std::string_view bytes);

  /// A chunk's identity: a hash of its bytes in which each fiber::shared object it refers to
  /// counts by its content and its order, not by its id (ids are random in each run).
  std::uint64_t identity(const writer& chunk);

 private:
  map_journal& journal_;
  std::uint32_t pool_;
  std::function<void()> appended_;
  std::unordered_map<std::uint64_t, std::uint64_t> object_hashes_;  // a shared object's id -> its content's hash
  std::vector<std::string_view> frames_;  // a message's frames, as journaled (reused)
};

}  // namespace fiber::detail
