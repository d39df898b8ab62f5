// Two processes on one host pass their bytes through shared memory instead of their unix socket:
// a segment (memfd) holding one single-producer single-consumer byte ring per direction. A side
// with nothing to do polls the ring briefly, then sleeps on its doorbell (an eventfd) that the
// other side rings only when it knows this side sleeps, so a busy ring costs no system call. The
// dialer makes the segment and both doorbells and passes them over the unix socket, which stays
// open: its hang-up is how the peer's death is seen. Ring members use it (primitives/ring/mesh),
// and so do a master's links to its children (transport/shared_lane).
//
// The segment is sealed against resizing before it is passed: a peer that shrank it would make
// this side's next touch of a missing page a SIGBUS. join() refuses a segment without the seals.
#pragma once
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace fiber::detail {

class shared_channel {
 public:
  /// Bytes each direction holds unless told otherwise (a ring member's).
  static constexpr std::size_t default_capacity = std::size_t{1} << 20;
  /// What join() accepts: from a page to a gibibyte a direction.
  static constexpr std::size_t min_capacity = 4096, max_capacity = std::size_t{1} << 30;

  /// The dialer's side: a fresh sealed segment of `capacity` bytes a direction (min_capacity to
  /// max_capacity) and two doorbells, or nullptr where the host refuses (the link then stays a socket).
  /// `populate`: every page mapped now (a ring member's buffers, used whole at once), rather than
  /// as the rings go round (a link that may carry little).
  static std::unique_ptr<shared_channel> make(std::size_t capacity = default_capacity, bool populate = true);
  /// The acceptor's side, from the descriptors the dialer passed (taken over: closed with it);
  /// nullptr for a segment that is not a sealed one of make()'s shape.
  static std::unique_ptr<shared_channel> join(int segment, int dialer_bell, int acceptor_bell, bool populate = true);
  ~shared_channel();
  shared_channel(const shared_channel&) = delete;
  shared_channel& operator=(const shared_channel&) = delete;

  /// The descriptors the dialer passes, in join()'s order.
  int segment_fd() const noexcept { return segment_; }
  int dialer_bell() const noexcept { return dialer_ ? own_bell_ : peer_bell_; }
  int acceptor_bell() const noexcept { return dialer_ ? peer_bell_ : own_bell_; }

  /// Non-blocking: bytes moved (0 when the ring is full, or empty).
  std::size_t write_some(const char* data, std::size_t n) noexcept;
  /// write_some of the pieces in order, as far as the ring takes them; one doorbell at most.
  std::size_t write_some(const iovec* pieces, std::size_t count) noexcept;
  std::size_t read_some(char* data, std::size_t n) noexcept;
  /// The bytes that can be read in one piece (up to the ring's end), left in place, so that a
  /// reduction can combine them from here; consume() takes them.
  std::pair<const char*, std::size_t> readable() const noexcept;
  void consume(std::size_t n) noexcept;

  /// Before sleeping on doorbell(): says so to the other side. False when progress became
  /// possible meanwhile (then do not sleep; the flag is cleared).
  bool sleep_for_write() noexcept;
  bool sleep_for_read() noexcept;
  /// After the sleep: clears both flags and empties the doorbell.
  void woke() noexcept;
  int doorbell() const noexcept { return own_bell_; }

  /// Bytes each direction holds.
  std::size_t capacity() const noexcept { return capacity_; }
  /// Whether the peer said it sleeps until this side writes (for tests).
  bool peer_sleeps_for_read() const noexcept;
  /// How often this side rang the peer's doorbell (for tests and benchmarks).
  std::uint64_t rings() const noexcept { return rings_.load(std::memory_order_relaxed); }
  /// Whether a write would move any bytes (readable() says whether any wait to be read).
  bool can_write() const noexcept;
  /// Takes back what sleep_for_read or sleep_for_write said (this side polls instead): the peer
  /// stops ringing. The doorbell may still hold a ring sent before.
  void stay_awake() noexcept;

 private:
  struct ring;
  shared_channel(int segment, int own_bell, int peer_bell, bool dialer, std::size_t capacity);
  ring& out() const noexcept;
  ring& in() const noexcept;
  char* out_data() const noexcept;
  char* in_data() const noexcept;
  void ring_peer() const noexcept;

  int segment_ = -1, own_bell_ = -1, peer_bell_ = -1;
  bool dialer_;
  std::size_t capacity_;
  char* base_ = nullptr;
  mutable std::atomic<std::uint64_t> rings_{0};
};

}  // namespace fiber::detail
