// libcurl's multi interface on Asio (one io_context drives the engines' HTTP calls too): curl says which sockets to watch and when to
// time out; Asio watches them (without owning them) and calls curl back when they are ready.
// Rules kept: curl is never called from inside its own callbacks (a 0 timeout is posted), no
// exception crosses a C callback, and a socket descriptor is released, never closed, by Asio.
#include "transport/http_client.hpp"

#include <asio/posix/stream_descriptor.hpp>
#include <asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <cctype>
#include <map>
#include <unordered_map>

#include "fiber/error.hpp"
#include "core/log.hpp"
#include "transport/curl_library.hpp"

namespace fiber::detail {

namespace {
class curl_error_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "curl"; }
  std::string message(int code) const override { return curl().easy_strerror(static_cast<CURLcode>(code)); }
};

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

const std::error_category& curl_category() noexcept {
  static curl_error_category c;
  return c;
}

std::string percent_encode(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

boost::json::value http_response::json() const {
  boost::system::error_code ec;
  auto v = boost::json::parse(body, ec);
  if (ec) {
    auto shown = body.size() > 200 ? body.substr(0, 200) + "..." : body;
    throw error(errc::malformed_message, "the answer to " + what + " (HTTP " + std::to_string(status) +
                                             ") is not JSON (" + ec.message() + "): " + shown);
  }
  return v;
}

std::string http_response::header(std::string_view name) const {
  auto key = lower(std::string(name));
  for (auto& [k, v] : headers)
    if (k == key) return v;
  return {};
}

struct http_client::impl {
  struct request_state {
    std::uint64_t id = 0;
    CURL* easy = nullptr;
    curl_slist* headers = nullptr;
    done_fn done;
    chunk_fn on_chunk;
    http_response response;
    char error_text[CURL_ERROR_SIZE] = {};
    std::string body;  // kept alive for curl
    bool callback_failed = false;
  };
  struct watched_socket {
    std::unique_ptr<asio::posix::stream_descriptor> descriptor;
    int what = 0;  // CURL_POLL_*
    bool reading = false, writing = false;
  };

  asio::io_context& io;
  const curl_library& api = curl();  // loaded here: a client that cannot have it fails to be made
  CURLM* multi = nullptr;
  asio::steady_timer timer;
  std::unordered_map<std::uint64_t, std::unique_ptr<request_state>> requests;
  std::map<curl_socket_t, watched_socket> sockets;
  std::uint64_t next_id = 1;
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);

  explicit impl(asio::io_context& io_) : io(io_), timer(io_) {
    multi = api.multi_init();
    api.multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, &on_socket);
    api.multi_setopt(multi, CURLMOPT_SOCKETDATA, this);
    api.multi_setopt(multi, CURLMOPT_TIMERFUNCTION, &on_timer);
    api.multi_setopt(multi, CURLMOPT_TIMERDATA, this);
  }

  ~impl();

  void cleanup(request_state& r) {
    if (r.easy) api.easy_cleanup(r.easy);
    if (r.headers) api.slist_free_all(r.headers);
    r.easy = nullptr;
    r.headers = nullptr;
  }

  // ---- curl's callbacks (C; nothing may throw out of them, and none calls curl)

  static int on_socket(CURL*, curl_socket_t fd, int what, void* userp, void*) noexcept;

  static int on_timer(CURLM*, long timeout_ms, void* userp) noexcept;

  static std::size_t on_body(char* data, std::size_t size, std::size_t n, void* userp) noexcept;

  static std::size_t on_header(char* data, std::size_t size, std::size_t n, void* userp) noexcept;

  // ---- the loop's side

  void watch(curl_socket_t fd);

  void ready(curl_socket_t fd, int direction, std::error_code ec, const std::shared_ptr<bool>& alive_flag) {
    if (!*alive_flag) return;
    auto it = sockets.find(fd);
    if (it != sockets.end()) (direction == CURL_CSELECT_IN ? it->second.reading : it->second.writing) = false;
    if (ec == asio::error::operation_aborted) return;
    int running = 0;
    api.multi_socket_action(multi, fd, ec ? CURL_CSELECT_ERR : direction, &running);
    if (!finish_done()) return;
    watch(fd);  // still wanted: wait again (curl may have removed or changed it meanwhile)
  }

  /// Completes what curl finished. False when this client is gone meanwhile: a request's
  /// handlers may hold the last reference to the client's owner (a backend's engine), and calling
  /// or dropping them then destroys this object, so nothing of it may be touched after.
  bool finish_done() {
    auto still_here = alive;
    int left = 0;
    while (CURLMsg* msg = api.multi_info_read(multi, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      std::uint64_t id = 0;
      char* priv = nullptr;
      api.easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
      id = reinterpret_cast<std::uintptr_t>(priv);
      complete(id, msg->data.result);
      if (!*still_here) return false;
    }
    return true;
  }

  void complete(std::uint64_t id, CURLcode result);

  std::uint64_t start(http_request req, done_fn done, chunk_fn on_chunk);

  /// Takes the request out of curl and completes it; an error puts `why` in the body.
  void finish(std::uint64_t id, std::error_code ec, std::string why) {
    auto it = requests.find(id);
    if (it == requests.end()) return;
    auto r = std::move(it->second);
    requests.erase(it);
    api.multi_remove_handle(multi, r->easy);
    cleanup(*r);
    if (ec) r->response.body = std::move(why);
    auto done = std::move(r->done);
    done(ec, std::move(r->response));
  }
};

http_client::impl::~impl() {
  *alive = false;
  timer.cancel();
  for (auto& [id, r] : requests) {
    api.multi_remove_handle(multi, r->easy);
    cleanup(*r);
  }
  for (auto& [fd, s] : sockets) {
    s.descriptor->cancel();
    s.descriptor->release();  // curl's descriptor: curl closes it
  }
  api.multi_cleanup(multi);
}

int http_client::impl::on_socket(CURL*, curl_socket_t fd, int what, void* userp, void*) noexcept {
  auto* self = static_cast<impl*>(userp);
  try {
    if (what == CURL_POLL_REMOVE) {
      auto it = self->sockets.find(fd);
      if (it != self->sockets.end()) {
        it->second.descriptor->cancel();
        it->second.descriptor->release();
        self->sockets.erase(it);
      }
      return 0;
    }
    auto& s = self->sockets[fd];
    if (!s.descriptor) s.descriptor = std::make_unique<asio::posix::stream_descriptor>(self->io, fd);
    s.what = what;
    self->watch(fd);
  } catch (const std::exception& e) {
    logf(log_level::error, "http: watching socket ", fd, ": ", e.what());
    return -1;
  }
  return 0;
}

int http_client::impl::on_timer(CURLM*, long timeout_ms, void* userp) noexcept {
  auto* self = static_cast<impl*>(userp);
  if (timeout_ms < 0) {
    self->timer.cancel();
    return 0;
  }
  // 0 included: run it from the loop, not from inside curl.
  self->timer.expires_after(std::chrono::milliseconds(timeout_ms));
  self->timer.async_wait([self, alive = self->alive](std::error_code ec) {
    if (ec || !*alive) return;
    int running = 0;
    self->api.multi_socket_action(self->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    self->finish_done();
  });
  return 0;
}

std::size_t http_client::impl::on_body(char* data, std::size_t size, std::size_t n, void* userp) noexcept {
  auto* r = static_cast<request_state*>(userp);
  std::size_t bytes = size * n;
  try {
    if (r->on_chunk)
      r->on_chunk(std::string_view(data, bytes));
    else
      r->response.body.append(data, bytes);
  } catch (const std::exception& e) {
    logf(log_level::error, "http: the body handler of ", r->response.what, " threw: ", e.what());
    r->callback_failed = true;
    return 0;  // makes curl fail the transfer (CURLE_WRITE_ERROR)
  }
  return bytes;
}

std::size_t http_client::impl::on_header(char* data, std::size_t size, std::size_t n, void* userp) noexcept {
  auto* r = static_cast<request_state*>(userp);
  std::size_t bytes = size * n;
  try {
    std::string_view line(data, bytes);
    if (line.starts_with("HTTP/")) r->response.headers.clear();  // a new response (after 100, redirects)
    auto colon = line.find(':');
    if (colon != std::string_view::npos) {
      auto value = line.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
      while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.remove_suffix(1);
      r->response.headers.emplace_back(lower(std::string(line.substr(0, colon))), std::string(value));
    }
  } catch (...) {
    return 0;
  }
  return bytes;
}

void http_client::impl::watch(curl_socket_t fd) {
  auto it = sockets.find(fd);
  if (it == sockets.end()) return;
  auto& s = it->second;
  if ((s.what & CURL_POLL_IN) && !s.reading) {
    s.reading = true;
    s.descriptor->async_wait(asio::posix::stream_descriptor::wait_read,
                             [this, fd, alive = alive](std::error_code ec) { ready(fd, CURL_CSELECT_IN, ec, alive); });
  }
  if ((s.what & CURL_POLL_OUT) && !s.writing) {
    s.writing = true;
    s.descriptor->async_wait(asio::posix::stream_descriptor::wait_write,
                             [this, fd, alive = alive](std::error_code ec) { ready(fd, CURL_CSELECT_OUT, ec, alive); });
  }
}

void http_client::impl::complete(std::uint64_t id, CURLcode result) {
  auto it = requests.find(id);
  if (it == requests.end()) return;
  auto& r = *it->second;
  if (result == CURLE_OK) {
    api.easy_getinfo(r.easy, CURLINFO_RESPONSE_CODE, &r.response.status);
    return finish(id, {}, {});
  }
  auto ec = result == CURLE_OPERATION_TIMEDOUT ? make_error_code(errc::timeout)
                                               : std::error_code(static_cast<int>(result), curl_category());
  // What went wrong, for the caller's message.
  std::string why = r.callback_failed ? "the body handler failed"
                    : r.error_text[0] ? r.error_text
                                      : api.easy_strerror(result);
  finish(id, ec, std::move(why));
}

std::uint64_t http_client::impl::start(http_request req, done_fn done, chunk_fn on_chunk) {
  auto r = std::make_unique<request_state>();
  r->id = next_id++;
  r->done = std::move(done);
  r->on_chunk = std::move(on_chunk);
  r->response.what = req.method + " " + req.url;
  r->body = std::move(req.body);
  CURL* e = r->easy = api.easy_init();
  api.easy_setopt(e, CURLOPT_URL, req.url.c_str());
  // The path goes as built: curl would otherwise fold "/../" away, so a path that ends in a part
  // taken from elsewhere could climb to another path of the same server (with its credentials).
  api.easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
  api.easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  api.easy_setopt(e, CURLOPT_ERRORBUFFER, r->error_text);
  // libcurl keeps a pointer per handle; the request's number travels in it (never dereferenced).
  api.easy_setopt(e, CURLOPT_PRIVATE, reinterpret_cast<char*>(static_cast<std::uintptr_t>(r->id)));  // NOLINT(performance-no-int-to-ptr)
  api.easy_setopt(e, CURLOPT_WRITEFUNCTION, &on_body);
  api.easy_setopt(e, CURLOPT_WRITEDATA, r.get());
  api.easy_setopt(e, CURLOPT_HEADERFUNCTION, &on_header);
  api.easy_setopt(e, CURLOPT_HEADERDATA, r.get());
  api.easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(req.timeout.count()));
  api.easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(req.connect_timeout.count()));
  if (!req.unix_socket.empty()) api.easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, req.unix_socket.c_str());
  if (req.method == "GET") {
    api.easy_setopt(e, CURLOPT_HTTPGET, 1L);
  } else if (req.method == "HEAD") {
    api.easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else {
    api.easy_setopt(e, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }
  if (!r->body.empty() || req.method == "POST" || req.method == "PUT" || req.method == "PATCH") {
    api.easy_setopt(e, CURLOPT_POSTFIELDS, r->body.data());
    api.easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r->body.size()));
  }
  bool has_type = false;
  for (auto& [k, v] : req.headers) {
    if (lower(k) == "content-type") has_type = true;
    r->headers = api.slist_append(r->headers, (k + ": " + v).c_str());
  }
  if (!r->body.empty() && !has_type) r->headers = api.slist_append(r->headers, "Content-Type: application/json");
  r->headers = api.slist_append(r->headers, "Expect:");  // no 100-continue round trip
  api.easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
  if (!req.ca_file.empty()) api.easy_setopt(e, CURLOPT_CAINFO, req.ca_file.c_str());
  if (!req.cert_file.empty()) api.easy_setopt(e, CURLOPT_SSLCERT, req.cert_file.c_str());
  if (!req.key_file.empty()) api.easy_setopt(e, CURLOPT_SSLKEY, req.key_file.c_str());
  // Blobs are copied by libcurl (CURL_BLOB_COPY): the request need not outlive this call.
  auto blob = [this, e](CURLoption option, std::string& pem) {
    if (pem.empty()) return;
    curl_blob b{pem.data(), pem.size(), CURL_BLOB_COPY};
    api.easy_setopt(e, option, &b);
  };
  blob(CURLOPT_CAINFO_BLOB, req.ca_pem);
  blob(CURLOPT_SSLCERT_BLOB, req.cert_pem);
  blob(CURLOPT_SSLKEY_BLOB, req.key_pem);
  if (!req.verify_tls) {
    api.easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
    api.easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  auto id = r->id;
  requests.emplace(id, std::move(r));
  // Added from the loop, never here: start() is called from body callbacks (a watch event that
  // makes its reader send a request), that is from inside curl, where libcurl refuses to add a
  // transfer (CURLM_RECURSIVE_API_CALL). And never complete inside start().
  asio::post(io, [this, id, e, alive = alive] {
    if (!*alive || !requests.contains(id)) return;  // cancelled before it went out
    if (auto rc = api.multi_add_handle(multi, e); rc != CURLM_OK)
      finish(id, std::error_code(static_cast<int>(CURLE_FAILED_INIT), curl_category()), api.multi_strerror(rc));
  });
  return id;
}


http_client::http_client(asio::io_context& io) : io_(io), impl_(std::make_unique<impl>(io)) {}
http_client::~http_client() = default;

std::uint64_t http_client::start(http_request request, done_fn done, chunk_fn on_chunk) {
  return impl_->start(std::move(request), std::move(done), std::move(on_chunk));
}

void http_client::cancel(std::uint64_t id) {
  // Posted: cancel() may be called from a body callback, that is from inside curl.
  asio::post(io_, [self = impl_.get(), alive = impl_->alive, id] {
    if (*alive) self->finish(id, asio::error::operation_aborted, "cancelled");
  });
}

std::size_t http_client::in_flight() const noexcept { return impl_->requests.size(); }

}  // namespace fiber::detail
