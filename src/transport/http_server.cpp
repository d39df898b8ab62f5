#include "transport/http_server.hpp"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/read.hpp>
#include <asio/ip/v6_only.hpp>
#include <asio/read_until.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

namespace fiber::detail {

struct http_server::shared {
  http_server_options options;
  admission admit;
  handler on_request;
};

namespace {

using asio::ip::tcp;
constexpr std::size_t max_head = std::size_t{64} * 1024;

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return std::string(s);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i] == '+' ? ' ' : s[i]);
    }
  }
  return out;
}

const char* reason_of(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    default: return "Status";
  }
}

struct bad_request {
  int status;
  std::string why;
};

/// Parses the head (request line and headers) of `head`, which ends with "\r\n\r\n".
http_served_request parse_head(std::string_view head) {
  http_served_request r;
  auto eol = head.find("\r\n");
  auto line = head.substr(0, eol);
  auto sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1 || !line.substr(sp2 + 1).starts_with("HTTP/1."))
    throw bad_request{400, "not an HTTP/1.x request line"};
  r.method = std::string(line.substr(0, sp1));
  r.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  for (auto at = eol + 2; at < head.size();) {
    auto end = head.find("\r\n", at);
    if (end == std::string_view::npos || end == at) break;
    auto h = head.substr(at, end - at);
    auto colon = h.find(':');
    if (colon == std::string_view::npos) throw bad_request{400, "a header without ':'"};
    r.headers.emplace_back(lower(std::string(h.substr(0, colon))), trim(h.substr(colon + 1)));
    at = end + 2;
  }
  return r;
}

/// Where a request's body goes as it arrives: memory, or an unnamed file that is mapped for the
/// handler once whole.
class body_sink {
 public:
  explicit body_sink(const std::optional<std::filesystem::path>& folder) {
    if (!folder) return;
    // Unnamed from the start where the file system can (no other process of the claim can open
    // it), else named for the moment between its making and its unlinking; gone with the last
    // descriptor either way, whatever ends this.
    fd_ = ::open(folder->c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      auto pattern = (*folder / ".fiber-body-XXXXXX").string();
      fd_ = ::mkostemp(pattern.data(), O_CLOEXEC);
      if (fd_ >= 0) ::unlink(pattern.c_str());
    }
    if (fd_ < 0) throw bad_request{500, "cannot make room for the body in " + folder->string() + ": " + std::strerror(errno)};
  }
  ~body_sink() {
    if (fd_ >= 0) ::close(fd_);
  }
  body_sink(const body_sink&) = delete;
  body_sink& operator=(const body_sink&) = delete;

  void append(const char* p, std::size_t n) {
    size_ += n;
    if (fd_ < 0) {
      memory_.append(p, n);
      return;
    }
    while (n > 0) {
      auto w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) throw bad_request{500, std::string("cannot store the body: ") + std::strerror(errno)};
      p += w;
      n -= static_cast<std::size_t>(w);
    }
  }
  std::uint64_t size() const noexcept { return size_; }

  /// Hands the whole body to `r`.
  void finish(http_served_request& r) {
    if (fd_ < 0) {
      auto held = std::make_shared<const std::string>(std::move(memory_));
      r.body = *held;
      r.body_keep = std::move(held);
      return;
    }
    if (size_ == 0) return;
    void* at = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (at == MAP_FAILED) throw bad_request{500, std::string("cannot read the stored body: ") + std::strerror(errno)};
    r.body = std::string_view(static_cast<const char*>(at), size_);
    r.body_keep = std::shared_ptr<const void>(at, [n = size_](const void* p) { ::munmap(const_cast<void*>(p), n); });
  }

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::string memory_;
};

class connection : public std::enable_shared_from_this<connection> {
 public:
  connection(tcp::socket s, std::shared_ptr<const http_server::shared> shared, std::shared_ptr<http_server::counts> counts)
      : socket_(std::move(s)), deadline_(socket_.get_executor()), shared_(std::move(shared)), counts_(std::move(counts)) {
    ++counts_->active;
    ++counts_->unchecked;
  }
  ~connection() {
    --counts_->active;
    if (!admitted_) --counts_->unchecked;
  }

  void start() {
    arm(shared_->options.head_timeout);
    asio::co_spawn(socket_.get_executor(), serve(shared_from_this()), asio::detached);
  }

 private:
  /// The connection is closed when `after` passes first (a client too slow to send or take).
  void arm(std::chrono::seconds after) {
    deadline_.expires_after(after);
    deadline_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (!ec) self->socket_.close(ec);
    });
  }

  void admitted() {
    admitted_ = true;
    --counts_->unchecked;
    arm(shared_->options.client_timeout);
  }

  static asio::awaitable<void> serve(std::shared_ptr<connection> self) {
    http_reply reply;
    try {
      reply = co_await self->answer();
    } catch (const bad_request& b) {
      reply = {};
      reply.status = b.status;
      reply.body = b.why + "\n";
    } catch (const std::system_error&) {  // the client went, or the deadline closed it
      self->deadline_.cancel();
      co_return;
    }
    // The answer to a refused or bad head gets a head's time to go, and the connection still counts
    // as unchecked until it closes: a stranger's refused request holds no more than its head did.
    if (!self->admitted_) self->arm(self->shared_->options.head_timeout);
    std::string head = "HTTP/1.1 " + std::to_string(reply.status) + " " + reason_of(reply.status) +
                       "\r\nContent-Type: " + reply.content_type;
    if (!reply.stream) head += "\r\nContent-Length: " + std::to_string(reply.body.size());
    for (auto& [name, value] : reply.headers) head += "\r\n" + name + ": " + value;
    head += "\r\nConnection: close\r\n\r\n";
    std::array<asio::const_buffer, 2> out{asio::buffer(head), asio::buffer(reply.body)};
    try {
      co_await asio::async_write(self->socket_, out, asio::use_awaitable);
    } catch (const std::system_error&) {
      reply.stream = nullptr;
    }
    if (reply.stream) {
      // It lasts as long as it has pieces and the client reads them: no deadline. Its request was
      // read whole, so the connection closes at once after it.
      self->deadline_.cancel();
      try {
        for (;;) {
          auto piece = co_await reply.stream();
          if (piece.empty()) break;
          co_await asio::async_write(self->socket_, asio::buffer(piece), asio::use_awaitable);
        }
      } catch (const std::system_error&) {  // the client went
      }
      std::error_code ec;
      self->socket_.shutdown(tcp::socket::shutdown_both, ec);
      self->socket_.close(ec);
      co_return;
    }
    // A lingering close: what the client still sends (a body refused before it was read) is read
    // and dropped until it closes or the deadline passes, so that a reset does not destroy the
    // answer before it is read.
    std::error_code ec;
    self->socket_.shutdown(tcp::socket::shutdown_send, ec);
    try {
      std::array<char, 16384> sink;
      for (;;) co_await self->socket_.async_read_some(asio::buffer(sink), asio::use_awaitable);
    } catch (const std::system_error&) {  // its end, or the deadline
    }
    self->socket_.close(ec);
    self->deadline_.cancel();
  }

  asio::awaitable<http_reply> answer() {
    auto n = co_await asio::async_read_until(socket_, asio::dynamic_buffer(in_, max_head), "\r\n\r\n", asio::use_awaitable);
    auto req = parse_head(std::string_view(in_).substr(0, n));
    in_.erase(0, n);
    if (shared_->admit) {
      if (auto refused = shared_->admit(req)) co_return std::move(*refused);
    }
    admitted();
    auto& options = shared_->options;
    bool chunked = lower(req.header("transfer-encoding")).find("chunked") != std::string::npos;
    auto length = req.header("content-length");
    std::uint64_t size = 0;
    if (!chunked && !length.empty()) {
      for (char c : length) {
        if (!std::isdigit(static_cast<unsigned char>(c)) || size > options.max_body) throw bad_request{400, "a bad Content-Length"};
        size = size * 10 + static_cast<unsigned>(c - '0');
      }
      if (size > options.max_body) throw bad_request{413, "the body is over " + std::to_string(options.max_body) + " bytes"};
    }
    if (lower(req.header("expect")) == "100-continue") {
      static constexpr std::string_view go_on = "HTTP/1.1 100 Continue\r\n\r\n";
      co_await asio::async_write(socket_, asio::buffer(go_on), asio::use_awaitable);
    }
    body_sink body(chunked || size > 0 ? options.body_folder : std::nullopt);
    if (chunked) {
      co_await read_chunked(body);
    } else {
      co_await take(size, body);  // what follows the body is not read: the answer closes the connection
    }
    body.finish(req);
    http_reply reply;
    try {
      reply = shared_->on_request(req);
    } catch (const std::exception& e) {  // said to the client, not mistaken for a lost connection
      reply = {};
      reply.status = 500;
      reply.body = std::string(e.what()) + "\n";
    }
    co_return reply;
  }

  /// `n` bytes of body into `to`: what was read with the head first, then from the socket.
  asio::awaitable<void> take(std::uint64_t n, body_sink& to) {
    auto ready = static_cast<std::size_t>(std::min<std::uint64_t>(n, in_.size()));
    to.append(in_.data(), ready);
    in_.erase(0, ready);
    n -= ready;
    std::vector<char> piece(static_cast<std::size_t>(std::min<std::uint64_t>(n, std::uint64_t{64} * 1024)));
    while (n > 0) {
      auto got = co_await socket_.async_read_some(
          asio::buffer(piece.data(), static_cast<std::size_t>(std::min<std::uint64_t>(n, piece.size()))), asio::use_awaitable);
      to.append(piece.data(), got);
      n -= got;
    }
  }

  /// Until `in_` holds `n` bytes (n small: a chunk's line end).
  asio::awaitable<void> fill(std::size_t n) {
    if (in_.size() >= n) co_return;
    auto have = in_.size();
    in_.resize(n);
    co_await asio::async_read(socket_, asio::buffer(in_.data() + have, n - have), asio::use_awaitable);
  }

  asio::awaitable<void> read_chunked(body_sink& to) {
    auto max_body = shared_->options.max_body;
    for (;;) {
      auto n = co_await asio::async_read_until(socket_, asio::dynamic_buffer(in_, max_head), "\r\n", asio::use_awaitable);
      std::uint64_t size = 0;
      bool digits = false;
      for (std::size_t i = 0; i + 2 <= n && hex_digit(in_[i]) >= 0; ++i, digits = true) {
        size = size * 16 + static_cast<unsigned>(hex_digit(in_[i]));
        if (size > max_body) throw bad_request{413, "the body is over " + std::to_string(max_body) + " bytes"};
      }
      if (!digits) throw bad_request{400, "a bad chunk size"};
      in_.erase(0, n);
      if (size == 0) co_return;  // trailers are not read: the answer closes the connection
      if (to.size() + size > max_body) throw bad_request{413, "the body is over " + std::to_string(max_body) + " bytes"};
      co_await take(size, to);
      co_await fill(2);
      if (in_.compare(0, 2, "\r\n") != 0) throw bad_request{400, "a chunk that does not end where its size says"};
      in_.erase(0, 2);
    }
  }

  tcp::socket socket_;
  asio::steady_timer deadline_;
  // Shared: a connection still reading its request when the server goes calls its handler after.
  std::shared_ptr<const http_server::shared> shared_;
  std::shared_ptr<http_server::counts> counts_;
  bool admitted_ = false;
  std::string in_;
};

}  // namespace

std::string http_served_request::header(std::string_view name) const {
  for (auto& [k, v] : headers)
    if (k == name) return v;
  return {};
}

std::string http_served_request::path() const { return target.substr(0, target.find('?')); }

std::string http_served_request::query(std::string_view name) const {
  auto q = target.find('?');
  if (q == std::string::npos) return {};
  std::string_view rest(target);
  rest.remove_prefix(q + 1);
  while (!rest.empty()) {
    auto amp = rest.find('&');
    auto pair = rest.substr(0, amp);
    auto eq = pair.find('=');
    if (percent_decode(pair.substr(0, eq)) == name) return eq == std::string_view::npos ? "" : percent_decode(pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return {};
}

http_server::http_server(asio::io_context& io, std::uint16_t port, http_server_options options, admission admit, handler h)
    : acceptor_(io), shared_(std::make_shared<const shared>(shared{std::move(options), std::move(admit), std::move(h)})) {
  // Both IPv6 and IPv4 where the host has IPv6 (a dual-stack pod network), else IPv4 alone.
  std::error_code ec;
  acceptor_.open(tcp::v6(), ec);
  if (!ec) acceptor_.set_option(asio::ip::v6_only(false), ec);
  if (!ec) acceptor_.bind(tcp::endpoint(tcp::v6(), port), ec);
  if (ec) {
    acceptor_.close(ec);
    acceptor_.open(tcp::v4());
    acceptor_.bind(tcp::endpoint(tcp::v4(), port));
  }
  acceptor_.listen();
}

http_server::http_server(asio::io_context& io, const std::string& address, std::uint16_t port, http_server_options options,
                         admission admit, handler h)
    : acceptor_(io), shared_(std::make_shared<const shared>(shared{std::move(options), std::move(admit), std::move(h)})) {
  tcp::endpoint at(asio::ip::make_address(address), port);
  acceptor_.open(at.protocol());
  acceptor_.set_option(tcp::acceptor::reuse_address(true));
  acceptor_.bind(at);
  acceptor_.listen();
}

std::uint16_t http_server::port() const { return acceptor_.local_endpoint().port(); }

void http_server::start() { accept(); }

void http_server::close() {
  std::error_code ec;
  acceptor_.close(ec);
}

void http_server::accept() {
  acceptor_.async_accept([this](std::error_code ec, tcp::socket s) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec && counts_->unchecked >= shared_->options.max_unchecked) {
      ++counts_->turned_away;  // closed unread: a flood holds no more than max_unchecked descriptors
      s.close(ec);
    } else if (!ec) {
      std::make_shared<connection>(std::move(s), shared_, counts_)->start();
    }
    accept();
  });
}

}  // namespace fiber::detail
