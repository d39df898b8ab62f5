// A direct link between two local processes: a unix stream socket carrying multipart messages,
// read on the io_context and written without ZeroMQ's I/O thread in between. One wake-up per
// direction instead of three (see docs/performance.md, managers); used for a manager's calls on
// the local backend. The socket's peer is authenticated by the caller (a secret sent first), so
// every length read from the peer is bounded before anything is kept: a link accepts messages of
// at most `max_message_bytes` (small until the caller raises it once the peer is proven) and
// closes, reporting message_too_large, on a frame that declares more.
//
// Frame: [u32 parts][u64 size]×parts, then the parts' bytes.
#pragma once
#include <asio/io_context.hpp>
#include <asio/local/stream_protocol.hpp>
#include <deque>
#include <memory>
#include <string>
#include <system_error>

#include "fiber/detail/unique_function.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {

class stream_link : public std::enable_shared_from_this<stream_link> {
 public:
  using on_message_fn = unique_function<void(multipart)>;
  using on_closed_fn = unique_function<void(std::error_code)>;

  /// The most parts one message may have.
  static constexpr std::uint32_t max_parts = 4096;
  /// Room for a message's own headers beside a payload of max_message_bytes.
  static constexpr std::size_t envelope_bytes = 4096;

  stream_link(asio::local::stream_protocol::socket socket, std::size_t max_message_bytes);

  /// Reads messages until the link closes; each goes to `on_message` on the io_context.
  void start(on_message_fn on_message, on_closed_fn on_closed);
  /// Queues `parts` and writes them as the socket takes them (never blocks).
  void send(multipart&& parts);
  /// Writes `parts` now, waiting for room if the socket is full (for a thread that drives no
  /// loop while it sends, e.g. a worker's main thread between two calls). A link is written
  /// either with send() or with send_blocking(), not both at once: their bytes would interleave.
  std::error_code send_blocking(const multipart& parts);
  void close();
  /// The largest message (all parts together) the peer may send from now on.
  void set_max_message_bytes(std::size_t n) noexcept { max_message_bytes_ = n; }

  asio::local::stream_protocol::socket& socket() noexcept { return socket_; }

 private:
  void read_some();
  bool parse();  // false: the peer broke the framing or a limit, and the link was closed
  void closed(std::error_code ec);
  bool stop(std::error_code why);  // closes, reports `why`, and returns false for parse()
  void write_next();

  asio::local::stream_protocol::socket socket_;
  on_message_fn on_message_;
  on_closed_fn on_closed_;
  std::string in_;
  std::deque<std::pair<std::string, multipart>> out_;  // frame head, parts
  bool writing_ = false;
  std::size_t max_message_bytes_;
  char buffer_[65536];
};

/// The frame head for `parts`.
std::string frame_head(const multipart& parts);

}  // namespace fiber::detail
