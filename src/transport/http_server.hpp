// A small HTTP/1.1 server on an io_context: one request per connection (each answer closes it),
// bodies by Content-Length or chunked, a bound on a body's size and on a slow client, and answers
// that go on (server-sent events). What the claim copy service answers the Kubernetes API
// server's pod proxy with, and what serves the dashboard; not a general server.
#pragma once
#include <asio/awaitable.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fiber::detail {

struct http_served_request {
  std::string method, target;                                // target: the path and its query
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
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
  std::vector<std::pair<std::string, std::string>> headers;  // more headers
  http_stream stream;  // when set, sent after `body` until it ends, free of the client timeout
};

class http_server {
 public:
  using handler = std::function<http_reply(const http_served_request&)>;

  /// Listens on `port` of every address (0: one the system picks); `max_body` bytes at most per
  /// request (413 beyond), `client_timeout` for a whole request to arrive and its answer to go.
  http_server(asio::io_context& io, std::uint16_t port, std::uint64_t max_body, std::chrono::seconds client_timeout,
              handler h);
  /// Listens on one address only ("127.0.0.1": this host's own clients); throws std::system_error
  /// when it cannot (an address not this host's, a port taken).
  http_server(asio::io_context& io, const std::string& address, std::uint16_t port, std::uint64_t max_body,
              std::chrono::seconds client_timeout, handler h);
  std::uint16_t port() const;
  /// Takes connections until close(); each is served on the io_context.
  void start();
  void close();
  /// Connections being served now (a request arriving or an answer leaving).
  std::size_t active() const noexcept { return *active_; }

 private:
  void accept();
  asio::ip::tcp::acceptor acceptor_;
  std::uint64_t max_body_;
  std::chrono::seconds client_timeout_;
  std::shared_ptr<const handler> handler_;
  std::shared_ptr<std::size_t> active_ = std::make_shared<std::size_t>(0);
};

}  // namespace fiber::detail
