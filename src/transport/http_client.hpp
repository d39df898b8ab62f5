// HTTP on fiber's io_context: libcurl's multi interface, its sockets watched by Asio.
// What the engine backends (Docker, Kubernetes, Slurm's REST API) talk through.
//
//   http_client http(io);
//   auto [ec, res] = co_await http.async_request({.url = "http://localhost/v1.41/_ping",
//                                                 .unix_socket = "/var/run/docker.sock"},
//                                                asio::experimental::as_tuple(asio::use_awaitable));
#pragma once
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <boost/json/value.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "fiber/detail/unique_function.hpp"

namespace fiber::detail {

struct http_request {
  std::string method = "GET";
  std::string url;          // http://, https://; with unix_socket the host part is only a name
  std::string unix_socket;  // non-empty: connect through this unix socket
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::chrono::milliseconds timeout{30000};  // the whole request; 0: none (watches, log streams)
  std::chrono::milliseconds connect_timeout{10000};
  // TLS: a CA bundle, and a client certificate and key (PEM files); empty: the system's CAs, none.
  std::string ca_file, cert_file, key_file;
  // The same as PEM text held in memory (kubeconfig's *-data fields); used when non-empty.
  std::string ca_pem, cert_pem, key_pem;
  bool verify_tls = true;
};

struct http_response {
  long status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;  // empty when the body was streamed to a callback
  /// The body as JSON; fiber::error(malformed_message) naming the request when it is not.
  boost::json::value json() const;
  /// The value of a header, or "".
  std::string header(std::string_view name) const;
  std::string what;  // "METHOD url", for messages
};

/// `text` for a URL's path segment or query value: RFC 3986's unreserved characters kept, every
/// other byte as %XX.
std::string percent_encode(std::string_view s);

/// libcurl's error codes as std::error_code (category "curl").
const std::error_category& curl_category() noexcept;

class http_client {
 public:
  explicit http_client(asio::io_context& io);
  ~http_client();
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  using done_fn = unique_function<void(std::error_code, http_response)>;
  using chunk_fn = unique_function<void(std::string_view)>;

  /// On the io_context's thread. `on_chunk`, when given, receives the body as it arrives
  /// (nothing is kept in the response). Returns an id for cancel(). `done` is called once, never
  /// from inside start().
  std::uint64_t start(http_request request, done_fn done, chunk_fn on_chunk = nullptr);
  /// Completes the request with asio::error::operation_aborted (if it has not completed).
  void cancel(std::uint64_t id);
  std::size_t in_flight() const noexcept;

  /// Completion: void(std::error_code, http_response). Supports per-operation cancellation.
  template <class Token>
  auto async_request(http_request request, Token&& token, chunk_fn on_chunk = nullptr) {
    // One shared_ptr as the initiation's argument: g++ 12 mishandles other non-trivial
    // arguments and captures of use_awaitable's initiation (see until_done in fiber/detail/completion.hpp).
    auto call = std::make_shared<std::pair<http_request, chunk_fn>>(std::move(request), std::move(on_chunk));
    return asio::async_initiate<Token, void(std::error_code, http_response)>(
        [](auto handler, http_client* self, const std::shared_ptr<std::pair<http_request, chunk_fn>>& taken) {
          auto ex = asio::get_associated_executor(handler, self->io_.get_executor());
          auto slot = asio::get_associated_cancellation_slot(handler);
          auto id = self->start(
              std::move(taken->first),
              [h = std::move(handler), ex](std::error_code ec, http_response r) mutable {
                asio::post(ex, [h = std::move(h), ec, r = std::move(r)]() mutable { h(ec, std::move(r)); });
              },
              std::move(taken->second));
          if (slot.is_connected()) slot.assign([self, id](asio::cancellation_type) { self->cancel(id); });
        },
        token, this, call);
  }

 private:
  struct impl;
  asio::io_context& io_;
  std::unique_ptr<impl> impl_;
};

}  // namespace fiber::detail
