// A small HTTP/1.1 server on an io_context: one request per connection (each answer closes it),
// bodies by Content-Length or chunked, and answers that go on (server-sent events). What the
// claim copy service answers the Kubernetes API server's pod proxy with, what serves the dashboard
// and hands a recording over; not a general server.
//
// Every listener of a run is reachable by other users of its host or network, so what a stranger
// can make it spend is bounded before anything is checked: a request's head must arrive within
// `head_timeout` and fit 64 KiB; at most `max_unchecked` connections may be waiting for their head
// to arrive and be admitted (more are closed at once, so a flood cannot take the process's
// descriptors); and `admit` sees the head before a byte of the body is read, so a request without
// its credentials never makes the server take in, or make room for, what it announces.
#pragma once
#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fiber::detail {

struct http_served_request {
  std::string method, target;                                // target: the path and its query
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  /// The body: in memory, or (http_server_options::body_folder) a file mapped read-only.
  std::string_view body;
  std::shared_ptr<const void> body_keep;  // owns what `body` points at
  /// The value of a header, or "".
  std::string header(std::string_view name) const;
  /// The path, without the query.
  std::string path() const;
  /// A query parameter, percent-decoded ("" when absent).
  std::string query(std::string_view name) const;
};

/// An answer that goes on: each piece it yields is sent as it comes (no Content-Length; the end of
/// the connection ends the body); an empty piece ends it. The client's leaving is seen at the next
/// piece, which then is not asked for again.
using http_stream = std::function<asio::awaitable<std::string>()>;

struct http_reply {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
  std::vector<std::pair<std::string, std::string>> headers{};  // more headers
  http_stream stream{};  // when set, sent after `body` until it ends, free of the client timeout
};

struct http_server_options {
  /// Bytes of body at most per request (413 beyond, before any is read); 0: no body is taken.
  std::uint64_t max_body = 0;
  /// For the request line and headers to arrive, from the connection's start.
  std::chrono::seconds head_timeout{10};
  /// For a whole admitted request to arrive and its answer to go (a stream's pieces excepted).
  std::chrono::seconds client_timeout{30};
  /// Connections at most whose head has not yet arrived and been admitted.
  std::size_t max_unchecked = 64;
  /// When set, bodies are written to an unnamed file in this folder as they arrive (never held
  /// whole in memory) and handed to the handler mapped read-only.
  std::optional<std::filesystem::path> body_folder;
};

class http_server {
 public:
  using handler = std::function<http_reply(const http_served_request&)>;
  /// Sees a request's head (its body is empty) before any of its body is read: an answer refuses
  /// it with that answer, nullopt lets it in.
  using admission = std::function<std::optional<http_reply>(const http_served_request&)>;

  /// Listens on `port` of every address (0: one the system picks).
  http_server(asio::io_context& io, std::uint16_t port, http_server_options options, admission admit, handler h);
  /// Listens on one address only ("127.0.0.1": this host's own clients); throws std::system_error
  /// when it cannot (an address not this host's, a port taken).
  http_server(asio::io_context& io, const std::string& address, std::uint16_t port, http_server_options options,
              admission admit, handler h);
  std::uint16_t port() const;
  /// Takes connections until close(); each is served on the io_context.
  void start();
  void close();
  /// Connections being served now (a request arriving or an answer leaving).
  std::size_t active() const noexcept { return counts_->active; }
  /// Connections whose head has not yet arrived and been admitted.
  std::size_t unchecked() const noexcept { return counts_->unchecked; }
  /// Connections closed at once because `max_unchecked` others were waiting.
  std::uint64_t turned_away() const noexcept { return counts_->turned_away; }

  struct shared;  // its settings and handlers, which its connections share
  struct counts {
    std::size_t active = 0, unchecked = 0;
    std::uint64_t turned_away = 0;
  };

 private:
  void accept();
  asio::ip::tcp::acceptor acceptor_;
  std::shared_ptr<const shared> shared_;
  std::shared_ptr<counts> counts_ = std::make_shared<counts>();
};

}  // namespace fiber::detail
