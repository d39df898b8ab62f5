// Two ring members on one host pass their bytes through shared memory instead of their unix
// socket: a segment (memfd) holding one single-producer single-consumer byte ring per direction.
// A side with nothing to do polls the ring briefly, then sleeps on its doorbell (an eventfd) that
// the other side rings only when it knows this side sleeps, so a busy ring costs no system call.
// The dialer makes the segment and both doorbells and passes them over the unix socket, which
// stays open: its hang-up is how a member's death is seen (mesh.cpp).
#pragma once
#include <cstddef>
#include <memory>
#include <utility>

namespace fiber::detail {

class shared_channel {
 public:
  /// The dialer's side: a fresh segment and two doorbells, or nullptr where the host refuses
  /// (the link then stays a socket).
  static std::unique_ptr<shared_channel> make();
  /// The acceptor's side, from the descriptors the dialer passed (taken over: closed with it).
  static std::unique_ptr<shared_channel> join(int segment, int dialer_bell, int acceptor_bell);
  ~shared_channel();
  shared_channel(const shared_channel&) = delete;
  shared_channel& operator=(const shared_channel&) = delete;

  /// The descriptors the dialer passes, in join()'s order.
  int segment_fd() const noexcept { return segment_; }
  int dialer_bell() const noexcept { return dialer_ ? own_bell_ : peer_bell_; }
  int acceptor_bell() const noexcept { return dialer_ ? peer_bell_ : own_bell_; }

  /// Non-blocking: bytes moved (0 when the ring is full, or empty).
  std::size_t write_some(const char* data, std::size_t n) noexcept;
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
  static constexpr std::size_t capacity = std::size_t{1} << 20;

 private:
  struct ring;
  shared_channel(int segment, int own_bell, int peer_bell, bool dialer);
  ring& out() const noexcept;
  ring& in() const noexcept;
  char* out_data() const noexcept;
  char* in_data() const noexcept;
  void ring_peer() const noexcept;

  int segment_ = -1, own_bell_ = -1, peer_bell_ = -1;
  bool dialer_;
  char* base_ = nullptr;
};

}  // namespace fiber::detail
