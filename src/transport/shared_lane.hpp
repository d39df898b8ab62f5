// One side of a link's bytes through shared memory (a shared_channel) on an io_context: the
// stream_link of a master and its child on one host writes and reads here instead of its unix
// socket once both agree (runtime/links/lane_handshake), and keeps the socket only to hear the
// peer's end.
//
// Waiting is by callback, on the io_context: when_readable and when_writable run their callback
// once the ring has bytes, or room. While nobody spins, the peer rings this side's doorbell (an
// eventfd the io_context watches) when it has made progress this side waits for. While the
// thread that drives the loop spins (spin_pollers), this side polls the ring itself and the peer
// rings nobody: a message between two spinning processes costs no system call at all, where a
// socket costs a send, a receive and the receiver's wake-up.
//
// The ring's bytes are the peer's: the reading side copies them out before it parses them (the
// peer could change them meanwhile), and every count read from the shared counters is bounded
// (shared_channel). Reads and callbacks on the io_context's thread; writes from any thread, one at
// a time (the link's write lock).
#pragma once
#include <sys/uio.h>

#include <asio/io_context.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>

#include "fiber/detail/unique_function.hpp"
#include "transport/shared_channel.hpp"
#include "transport/spin_pollers.hpp"

namespace fiber::detail {

class shared_lane : public spin_pollers::poller, public std::enable_shared_from_this<shared_lane> {
 public:
  using clock = std::chrono::steady_clock;
  /// Bytes a link's ring holds each way, about what a unix socket buffers: a larger message
  /// passes in pieces, the reader emptying as the writer fills, and each piece may cost a wake-up
  /// (a 64 KiB ring moved 1 MB messages at 0.6x the socket's rate, this one at 0.9-1.3x).
  static constexpr std::size_t link_capacity = std::size_t{256} * 1024;

  /// Watches `channel`'s doorbell on `io` and joins the io_context's spin pollers.
  static std::shared_ptr<shared_lane> open(asio::io_context& io, std::unique_ptr<shared_channel> channel);
  ~shared_lane() override;
  shared_lane(const shared_lane&) = delete;
  shared_lane& operator=(const shared_lane&) = delete;

  /// Copies what the ring takes of `iov` (in order); 0 when it is full.
  std::size_t write(const iovec* iov, std::size_t count) noexcept;
  /// Copies out up to `n` bytes; 0 when there are none.
  std::size_t read(char* into, std::size_t n) noexcept;
  bool can_read() const noexcept { return channel_->readable().second != 0; }

  /// Runs `then` on the io_context once bytes can be read (posted at once when they can now).
  /// One callback waits at a time; a second replaces the first.
  void when_readable(unique_function<void()> then);
  /// ... once the ring has room.
  void when_writable(unique_function<void()> then);
  /// Drops the read callback that waits (its caller reads at once instead).
  void forget_readable() noexcept { on_readable_ = nullptr; }
  /// For a thread that runs no loop (a pulse, a flush before exit): waits until the ring has room
  /// or `until` passes. False when it passed (or the lane closed) without room.
  bool wait_writable(clock::time_point until);

  /// Stops watching the doorbell and drops the callbacks; the ring stays mapped while this lives.
  void close() noexcept;

  /// The channel, for the handshake that passes its descriptors.
  const shared_channel& channel() const noexcept { return *channel_; }

  // spin_pollers::poller
  void awake() noexcept override;
  bool poll() override;
  void asleep() noexcept override;

 private:
  shared_lane(asio::io_context& io, std::unique_ptr<shared_channel> channel);
  void watch_doorbell();
  /// Runs the callbacks whose condition holds; true when one ran.
  bool run_ready();
  /// Says to the peer that this side waits (its doorbell to be rung), or, when the condition holds
  /// already, posts the callback.
  void arm() noexcept;

  asio::io_context& io_;
  std::unique_ptr<shared_channel> channel_;
  asio::posix::stream_descriptor doorbell_;  // a duplicate of the channel's, for the io_context
  unique_function<void()> on_readable_, on_writable_;
  bool spinning_ = false;  // a spin polls: the peer is told not to ring
  std::atomic<bool> closed_{false};  // close() may come from another thread (a link closed there)
};

}  // namespace fiber::detail
