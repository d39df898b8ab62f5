// A ZeroMQ socket driven by an asio::io_context: the one loop that also runs timers and HTTP calls.
//
// Operations are tried with ZMQ_DONTWAIT first; only on EAGAIN do we wait for ZMQ_FD, which is
// edge-triggered and also signals for sends: after every send we re-check for input, because
// the send may have consumed the edge a parked receive was waiting for.
//
// No frame is larger than max_frame_bytes: a larger part travels as several frames behind a
// layout frame, and the receiving channel joins them. So a socket that listens for strangers
// can refuse any frame above that size (ZMQ_MAXMSGSIZE, which also bounds the handshake's
// commands, before a peer has proven anything) and still take messages of any allowed size.
//
// A message of several parts and at most max_packed_bytes travels as one frame, the parts
// packed behind their layout: ZeroMQ pays per frame (a queue entry, a wake-up of its I/O
// thread's batch), and CURVE pays a box per frame, nonce and key derivation included. A pool's
// task is three parts and its result two, so across a network a task cost five boxes, now two.
#pragma once
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/dispatch.hpp>
#include <asio/post.hpp>
#include <deque>
#include <memory>
#include <string>
#include <system_error>
#include <vector>
#include <zmq.hpp>

#include "fiber/detail/unique_function.hpp"

namespace fiber::detail {

using multipart = std::vector<zmq::message_t>;

/// The largest frame a zmq_channel sends (below glibc's mmap threshold, so a receiver's
/// buffers come from the heap rather than fresh mappings).
inline constexpr std::size_t max_frame_bytes = std::size_t{64} << 10;

/// The largest message whose parts travel packed in one frame: above it, the per-frame cost
/// is small beside the bytes', and the copy into one frame is not worth making.
inline constexpr std::size_t max_packed_bytes = std::size_t{16} << 10;

class zmq_channel : public std::enable_shared_from_this<zmq_channel> {
 public:
  /// `from_callback`: true when called from the channel's own readiness callback (the handler
  /// may then run inline), false inside the initiating call (it must be posted).
  using receive_handler = unique_function<void(std::error_code, multipart, bool from_callback)>;

  zmq_channel(asio::io_context& io, zmq::socket_t socket);
  ~zmq_channel();
  zmq_channel(const zmq_channel&) = delete;

  zmq::socket_t& socket() noexcept { return socket_; }

  /// Sends all parts now, or queues them until the socket can take them. Returns an error only
  /// for failures that will not go away (for a ROUTER: the peer is gone), and then leaves
  /// `parts` as they came.
  std::error_code send(multipart&& parts);

  /// Receives the next multipart message. Completion: void(std::error_code, multipart).
  /// Supports per-operation cancellation (terminal, partial, total).
  template <class Token>
  auto async_receive(Token&& token) {
    return asio::async_initiate<Token, void(std::error_code, multipart)>(
        // `self` as an argument, not a capture: see until_done in fiber/detail/completion.hpp (g++ 12).
        [](auto handler, const std::shared_ptr<zmq_channel>& self) { self->initiate_receive(std::move(handler)); }, token,
        shared_from_this());
  }

  /// Closes the socket; a parked receive completes with asio::error::operation_aborted.
  void close();

  /// Sends every part as a frame of its own: for a peer that is not a zmq_channel (libzmq's ZAP
  /// client), which could not unpack them.
  void keep_frames() noexcept { pack_ = false; }

  /// A split message announcing more than this many bytes in all is dropped (logged) rather
  /// than joined; 0: no limit.
  void limit_joined_messages(std::size_t max_bytes) noexcept { max_joined_ = max_bytes; }

 private:
  template <class Handler>
  void initiate_receive(Handler handler) {
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto work = asio::make_work_guard(asio::get_associated_executor(handler, io_.get_executor()));
    if (slot.is_connected())
      slot.assign([weak = weak_from_this()](asio::cancellation_type) {
        if (auto self = weak.lock()) self->cancel_receive();
      });
    start_receive([h = std::move(handler), work = std::move(work), slot](std::error_code ec, multipart m,
                                                                          bool from_callback) mutable {
      if (slot.is_connected()) slot.clear();
      auto ex = work.get_executor();
      auto f = [h = std::move(h), ec, m = std::move(m)]() mutable { h(ec, std::move(m)); };
      // Never complete inside the initiating function; from our readiness callback, a handler
      // on this executor runs at once (one reactor round trip fewer per message).
      if (from_callback)
        asio::dispatch(ex, std::move(f));
      else
        asio::post(ex, std::move(f));
    });
  }

  void start_receive(receive_handler h);
  void cancel_receive();
  bool try_receive(multipart& out);
  void flush_outbox();
  void on_ready();
  void arm();

  asio::io_context& io_;
  zmq::socket_t socket_;
  asio::posix::stream_descriptor fd_;
  receive_handler pending_;
  std::deque<multipart> outbox_;
  bool needs_split(const multipart& parts) const;
  zmq::message_t layout_of(const multipart& parts) const;
  void layout_of(const multipart& parts, const char* magic, zmq::message_t& into) const;
  /// True when `parts` travel packed: two parts or more, max_packed_bytes in all.
  bool packs(const multipart& parts) const;
  /// The frames that carry `parts` packed (a copy: `parts` are left as they are).
  multipart packed(const multipart& parts) const;
  /// Unpacks a packed message in place; why it cannot be, or empty.
  std::string unpack(multipart& parts) const;
  /// Moves every payload part of `parts` to `out`, those over max_frame_bytes as pieces.
  void append_pieces(multipart& parts, multipart& out) const;
  /// The frames that carry `parts`: packed, as they are, or a layout frame and pieces.
  multipart split(multipart&& parts) const;
  /// Joins a split message in place; why it cannot be joined, or empty.
  std::string join(multipart& parts) const;

  bool pack_ = true;     // small messages of several parts travel packed in one frame
  bool router_ = false;  // the first frame of every message is a peer's routing id
  std::size_t max_joined_ = 0;
  bool waiting_ = false;
  bool closed_ = false;
  bool from_callback_ = false;  // inside our readiness callback (not inside a send)
};

}  // namespace fiber::detail
