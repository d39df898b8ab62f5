// A direct link between two local processes: a unix stream socket carrying multipart messages,
// read on the io_context and written without ZeroMQ's I/O thread in between. One wake-up per
// direction instead of three (see docs/performance.md, managers); used for a manager's calls on
// the local backend. The socket's peer is authenticated by the caller (a secret sent first).
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
#include "io/zmq_channel.hpp"

namespace fiber::detail {

class stream_link : public std::enable_shared_from_this<stream_link> {
 public:
  using on_message_fn = unique_function<void(multipart)>;
  using on_closed_fn = unique_function<void(std::error_code)>;

  explicit stream_link(asio::local::stream_protocol::socket socket);

  /// Reads messages until the link closes; each goes to `on_message` on the io_context.
  void start(on_message_fn on_message, on_closed_fn on_closed);
  /// Queues `parts` and writes them as the socket takes them (never blocks).
  void send(multipart&& parts);
  /// Writes `parts` now, waiting for room if the socket is full (for a thread that drives no
  /// loop while it sends, e.g. a worker's main thread between two calls). A link is written
  /// either with send() or with send_blocking(), not both at once: their bytes would interleave.
  std::error_code send_blocking(const multipart& parts);
  void close();

  asio::local::stream_protocol::socket& socket() noexcept { return socket_; }

 private:
  void read_some();
  void parse();
  void write_next();

  asio::local::stream_protocol::socket socket_;
  on_message_fn on_message_;
  on_closed_fn on_closed_;
  std::string in_;
  std::deque<std::pair<std::string, multipart>> out_;  // frame head, parts
  bool writing_ = false;
  char buffer_[65536];
};

/// The frame head for `parts`.
std::string frame_head(const multipart& parts);

}  // namespace fiber::detail
