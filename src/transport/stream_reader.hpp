// The reading side of a stream_link: frames taken from the socket, each message delivered whole
// on the io_context. Every length read from the peer is bounded before anything is kept: a frame
// that declares more parts than max_parts, or more bytes than max_message_bytes (small until the
// caller raises it once the peer is proven), closes the link, reported as malformed_message or
// message_too_large. Small messages are read through the buffer, several per system call; a large
// one straight into its parts' own memory. On an encrypted link the socket's bytes go into the TLS
// session and what it decrypts into the buffer (or a large message's parts), on the caller's
// thread. Through a shared-memory lane (shared_lane) the bytes come from the ring, copied into the
// buffer before they are parsed. On the io_context's thread.
#pragma once
#include <asio/buffer.hpp>
#include <asio/generic/stream_protocol.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <vector>

#include "fiber/detail/unique_function.hpp"
#include "transport/shared_lane.hpp"
#include "transport/tls_session.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {

class stream_reader {
 public:
  using socket_type = asio::generic::stream_protocol::socket;
  using clock = std::chrono::steady_clock;
  using on_message_fn = unique_function<void(multipart)>;
  using on_closed_fn = unique_function<void(std::error_code)>;

  /// The most parts one message may have.
  static constexpr std::uint32_t max_parts = 4096;
  /// Messages whose parts total this much or more are read into their parts directly.
  static constexpr std::size_t direct_read_bytes = std::size_t{16} * 1024;
  /// The read buffer (small messages, several per read).
  static constexpr std::size_t buffer_bytes = std::size_t{64} * 1024;

  /// Reads `socket`, decrypting with `tls` when given (that session is used under `tls_mutex`,
  /// which the writing side holds too). `close` closes the link (a frame out of bounds).
  stream_reader(socket_type& socket, tls_session* tls, std::recursive_mutex& tls_mutex, std::size_t max_message_bytes,
                unique_function<void()> close);

  /// Reads messages until the link closes; `owner` is kept alive while a read waits.
  void start(std::weak_ptr<void> owner, on_message_fn on_message, on_closed_fn on_closed);

  /// The largest message (all parts together) the peer may send from now on.
  void set_max_message_bytes(std::size_t n) noexcept { max_message_bytes_ = n; }
  /// Keeps last_heard() on an unencrypted link too (a link whose silence is watched: a host hub's
  /// children's); an encrypted link always keeps it. Before start().
  void track_heard() noexcept { heard_tracked_ = true; }
  /// After a read that emptied the socket, posts the next one behind the handlers queued rather
  /// than reading again at once. For a link whose peer speaks only after this side answers (a
  /// worker's to its master): the read at once would find nothing, on the path between the
  /// message and the answer. A master's link from a child keeps reading at once: a child's
  /// answer is often followed by a second message (its next get) that the read finds. A plain
  /// link's reads only (an encrypted one drains the session as before). Before start().
  void defer_after_drain() noexcept { defer_drained_ = true; }
  /// From the next read on, the peer's bytes come through `lane` (what the buffer holds is parsed
  /// first); the socket is watched only for its end, and bytes on it then close the link. On the
  /// io_context's thread: before start(), or from a message's handler.
  void use_lane(std::shared_ptr<shared_lane> lane) noexcept { lane_ = std::move(lane); }
  /// When bytes were last read (a large message's body aside).
  clock::time_point last_heard() const noexcept { return last_heard_; }

 private:
  enum class parsed { need_more, reading_body, stopped };
  void read_some();
  parsed parse();
  /// A large message: what the buffer holds is copied into its parts, the rest read straight
  /// into them. need_more: it was delivered at once; reading_body: the read goes on.
  parsed read_body(const std::uint64_t* sizes, std::uint32_t parts);
  void make_room() noexcept;
  bool deliver(multipart&& m);  // false: the handler closed the link
  void closed(std::error_code ec);
  parsed stop(std::error_code why);  // closes and reports `why`
  /// Encrypted: decrypts into the read buffer what has come, waiting for more when there is none.
  void read_tls();
  /// Encrypted: fills a large message's parts (rest_) as bytes come, then delivers it.
  void read_body_tls();
  /// Encrypted: takes what the socket holds into the session; false when the link ended.
  bool pull_cipher();
  long open_tls(void* dst, std::size_t capacity);
  void tls_failed();
  std::shared_ptr<void> keep() const { return owner_.lock(); }
  /// Through a lane: what the ring holds into the buffer, parsed, then waits for more.
  void read_lane();
  /// Through a lane: fills a large message's parts (rest_), then delivers it.
  void read_body_lane();
  /// Through a lane: waits for the socket's end (or bytes that should not be there).
  void watch_socket();
  /// The peer ended: what its ring still holds is read, then the link reports `why`.
  void lane_ended(std::error_code why);

  socket_type& socket_;
  tls_session* tls_;
  std::recursive_mutex& tls_mutex_;
  std::size_t max_message_bytes_;
  unique_function<void()> close_;
  std::weak_ptr<void> owner_;
  on_message_fn on_message_;
  on_closed_fn on_closed_;
  std::unique_ptr<char[]> in_;
  std::size_t in_begin_ = 0, in_end_ = 0;
  multipart body_;  // a large message being read into its parts
  std::unique_ptr<char[]> cipher_;  // encrypted: a read's bytes before they are fed in
  std::vector<asio::mutable_buffer> rest_;  // encrypted: what a large message still needs
  clock::time_point last_heard_ = clock::now();
  bool heard_tracked_ = false;
  bool defer_drained_ = false;
  std::shared_ptr<shared_lane> lane_;
  bool watching_socket_ = false;
  bool reading_body_ = false;          // through a lane: rest_ is being filled
  std::optional<std::error_code> ended_;  // through a lane: the socket ended; the ring is drained, then closed
};

}  // namespace fiber::detail
