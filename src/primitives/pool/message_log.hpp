// An append-only log of messages, read back in order and let go from its oldest: what a durable
// run's worker holds for a master that may take the run up (held_results). A worker at chunksize
// 1 holds thousands of small messages between two syncs of its master's journal; a copy of each
// as its own ZeroMQ messages cost allocations that made each task 10-20% dearer. Here small
// frames are copied into one buffer (no allocation per message once it has grown), large ones
// kept as ZeroMQ copies (counted references: their bytes are not copied). Not thread-safe: its
// owner locks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "transport/zmq_channel.hpp"

namespace fiber::detail {

class message_log {
 public:
  /// A frame this large is kept as a ZeroMQ copy rather than copied.
  static constexpr std::size_t large_frame = 1024;

  /// Appends a copy of `m`.
  void append(const multipart& m);
  /// How many messages were appended in all: the position after the last.
  std::uint64_t end() const noexcept { return first_ + index_.size(); }
  /// The first message still held.
  std::uint64_t begin() const noexcept { return first_; }
  /// Lets go of the messages before position `p`.
  void drop_before(std::uint64_t p);
  /// Copies of messages [from, to) (within [begin(), end())), in order.
  std::vector<multipart> copies(std::uint64_t from, std::uint64_t to) const;

 private:
  struct where {
    std::size_t at;       // its offset in bytes_
    std::uint64_t large;  // large frames appended before it
  };
  std::string bytes_;  // [u32 frames] then each frame [u32 size][bytes], or large_marker for a large one
  std::deque<where> index_;      // the messages held, from first_ on
  std::uint64_t first_ = 0;
  std::deque<zmq::message_t> large_;
  std::uint64_t large_first_ = 0;  // large frames let go of
  std::uint64_t large_appended_ = 0;
};

}  // namespace fiber::detail
