// A direct link between two local processes: a unix stream socket carrying multipart messages,
// read on the io_context and written without ZeroMQ's I/O thread in between. One wake-up per
// direction instead of three (see docs/performance-log.md); on the local backend every message
// between a master and its children travels on one (docs/design.md, "Direct links on this host"). The
// socket's peer is authenticated by the caller (a secret sent first), so every length read from
// the peer is bounded before anything is kept: a link accepts messages of at most
// `max_message_bytes` (small until the caller raises it once the peer is proven) and closes,
// reporting message_too_large, on a frame that declares more.
//
// Frame: [u32 parts][u64 size]×parts, then the parts' bytes. Small messages are read through the
// link's buffer, several per system call; a large one straight into its parts' own memory.
// Sends write at once as far as the socket takes them and queue only the rest.
//
// Between a master and its child on one host, the link's bytes may move to shared memory once both
// agree (use_lane; runtime/links/lane_handshake): the same frames, written into and read from a
// shared_lane's rings, with the socket kept to hear the peer's end.
//
// Across a network the same link runs on TCP with TLS 1.3 (transport/tls_session): frames are
// encrypted as they are queued and decrypted as they are read, on the caller's thread, still
// without an I/O thread between (docs/design.md, "Across hosts: TLS 1.3 on the same links").
#pragma once
#include <asio/generic/stream_protocol.hpp>
#include <asio/io_context.hpp>
#include <asio/local/stream_protocol.hpp>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <sys/uio.h>

#include "fiber/detail/unique_function.hpp"
#include "transport/shared_lane.hpp"
#include "transport/stream_reader.hpp"
#include "transport/tls_session.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {

class stream_link : public std::enable_shared_from_this<stream_link> {
 public:
  using on_message_fn = stream_reader::on_message_fn;
  using on_closed_fn = stream_reader::on_closed_fn;

  static constexpr std::uint32_t max_parts = stream_reader::max_parts;
  /// Room for a message's own headers beside a payload of max_message_bytes.
  static constexpr std::size_t envelope_bytes = 4096;
  static constexpr std::size_t direct_read_bytes = stream_reader::direct_read_bytes;

  using socket_type = asio::generic::stream_protocol::socket;
  using clock = std::chrono::steady_clock;

  stream_link(asio::local::stream_protocol::socket socket, std::size_t max_message_bytes);
  /// A link on any stream socket; with `tls` (its handshake done), encrypted.
  stream_link(socket_type socket, std::size_t max_message_bytes, std::unique_ptr<tls_session> tls = nullptr);

  /// Reads messages until the link closes; each goes to `on_message` on the io_context.
  void start(on_message_fn on_message, on_closed_fn on_closed);
  /// The reading side: its limit on a message (set_max_message_bytes), when it last heard.
  stream_reader& reader() noexcept { return reader_; }
  /// Writes `parts` now as far as the socket takes them and the rest as it drains (never blocks;
  /// on the io_context's thread). An error means the link is closed or broken and `parts` was
  /// not taken (it is left as it was).
  std::error_code send(multipart&& parts);
  /// Writes `parts` now, waiting for room if the socket is full (for a thread that drives no
  /// loop while it sends). A link is written either with send() or with send_blocking(), not
  /// both at once: their bytes would interleave.
  std::error_code send_blocking(const multipart& parts);
  /// Writes what send() has queued, waiting at most `limit` for the peer to take it (before a
  /// process exits). False when something was left unwritten.
  bool flush(std::chrono::milliseconds limit);
  void close();
  /// Coalescing: send() keeps small messages and writes all that one turn of the io_context sent
  /// in one write (one TLS record per 16 KiB) after the turn's other ready handlers have run. For
  /// a link that carries many peers' messages (a host hub's): one system call, and over TLS one
  /// encryption, for many messages. Set before the first send, on the io_context's thread.
  void set_coalescing(bool on) noexcept { coalescing_ = on; }
  /// The writing system calls made so far (a coalesced batch is one; for tests and benchmarks).
  std::uint64_t writes() const noexcept { return writes_.load(std::memory_order_relaxed); }

  /// From any thread (a worker's pulse while its main thread runs a task): writes `parts` unless
  /// bytes already wait to be written (they will be heard), waiting at most `limit` for room.
  /// False when the link is broken or the peer took nothing within `limit`.
  bool send_pulse(const multipart& parts, std::chrono::milliseconds limit);
  /// When this side last wrote a message.
  clock::time_point last_sent() const noexcept { return clock::time_point(clock::duration(last_sent_.load())); }
  bool encrypted() const noexcept { return tls_ != nullptr; }
  /// Whether the peer's bytes wait in the socket (or the lane), not read yet.
  bool bytes_waiting() noexcept;
  /// From now on this side's bytes go through `lane`, and the peer's come through it (the reader
  /// switches once what it holds is parsed). On the io_context's thread, before start() or from a
  /// message's handler, with nothing queued for the socket: false (and no switch) otherwise.
  bool use_lane(std::shared_ptr<shared_lane> lane);
  /// Whether the bytes go through shared memory.
  bool shared() const noexcept { return lane_ != nullptr; }

  socket_type& socket() noexcept { return socket_; }

 private:
  /// Writes `parts` whole, waiting for room until `deadline` (none: as long as it takes).
  std::error_code write_all(const multipart& parts, std::optional<clock::time_point> deadline);
  /// Encrypted: `head` and `parts` as the bytes to write.
  std::string sealed(const std::string& head, const multipart& parts);

  struct outgoing {
    std::string head;
    multipart parts;
  };
  /// Writes `head` then `parts` now as far as the socket takes them, queueing the rest (`parts`
  /// is taken only then: on an error it is left as it was).
  std::error_code write_or_queue(std::string&& head, multipart& parts);
  /// Coalescing: writes what the batch holds (under write_mutex_).
  std::error_code flush_batch();
  /// Writes queued messages until the socket is full; 0 bytes is not an error.
  std::error_code write_queued();
  void wait_writable();
  /// Writes what `iov` holds as far as the socket (or the lane) takes it: bytes, or -errno
  /// (-EAGAIN when full).
  ssize_t put_bytes(iovec* iov, std::size_t count);
  void consume_written(std::size_t n);
  void note_sent() noexcept { last_sent_.store(clock::now().time_since_epoch().count(), std::memory_order_relaxed); }

  socket_type socket_;
  std::unique_ptr<tls_session> tls_;
  std::shared_ptr<shared_lane> lane_;
  std::atomic<clock::rep> last_sent_{clock::now().time_since_epoch().count()};
  // Writes may come from a second thread (send_pulse); everything that writes holds this, and on
  // an encrypted link everything that uses the session.
  std::recursive_mutex write_mutex_;
  stream_reader reader_;
  std::deque<outgoing> out_;
  std::size_t front_written_ = 0;  // bytes of out_.front() already written
  bool write_waiting_ = false;
  bool coalescing_ = false;
  bool flush_posted_ = false;
  std::string batch_;  // coalescing: frames sent this turn, not written yet
  std::atomic<std::uint64_t> writes_{0};
  std::error_code broken_;
};

/// The frame head for `parts`.
std::string frame_head(const multipart& parts);

}  // namespace fiber::detail
