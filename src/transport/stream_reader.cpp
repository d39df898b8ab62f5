#include "transport/stream_reader.hpp"

#include <asio/post.hpp>
#include <asio/read.hpp>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/log.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

stream_reader::stream_reader(socket_type& socket, tls_session* tls, std::recursive_mutex& tls_mutex,
                             std::size_t max_message_bytes, unique_function<void()> close)
    : socket_(socket),
      tls_(tls),
      tls_mutex_(tls_mutex),
      max_message_bytes_(max_message_bytes),
      close_(std::move(close)),
      in_(new char[buffer_bytes]) {
  if (tls_) cipher_.reset(new char[buffer_bytes]);
}

void stream_reader::start(std::weak_ptr<void> owner, on_message_fn on_message, on_closed_fn on_closed) {
  owner_ = std::move(owner);
  on_message_ = std::move(on_message);
  on_closed_ = std::move(on_closed);
  read_some();
}

void stream_reader::closed(std::error_code ec) {
  if (lane_) lane_->close();  // nothing more comes through it: its doorbell is no longer watched
  if (auto f = std::move(on_closed_)) {
    on_closed_ = nullptr;
    f(ec);
  }
}

stream_reader::parsed stream_reader::stop(std::error_code why) {
  close_();
  closed(why);
  return parsed::stopped;
}

// ---- reading

void stream_reader::make_room() noexcept {
  if (in_begin_ == in_end_) {
    in_begin_ = in_end_ = 0;
  } else if (in_end_ == buffer_bytes) {  // a message's start is at the end: move it to the front
    std::memmove(in_.get(), in_.get() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
}

void stream_reader::read_some() {
  make_room();
  if (lane_) return read_lane();
  if (tls_) return read_tls();
  auto room = buffer_bytes - in_end_;
  socket_.async_read_some(asio::buffer(in_.get() + in_end_, room),
                          [this, room, keep = keep()](std::error_code ec, std::size_t n) mutable {
                            if (ec) return closed(ec);
                            in_end_ += n;
                            if (heard_tracked_) last_heard_ = clock::now();
                            if (parse() != parsed::need_more) return;
                            if (n == room || !defer_drained_) return read_some();
                            asio::post(socket_.get_executor(), [this, keep = std::move(keep)] {
                              if (socket_.is_open()) read_some();
                              else closed(asio::error::operation_aborted);
                            });
                          });
}

bool stream_reader::deliver(multipart&& m) {
  if (on_message_) on_message_(std::move(m));
  return socket_.is_open();
}

stream_reader::parsed stream_reader::parse() {
  for (;;) {
    const char* at = in_.get() + in_begin_;
    std::size_t available = in_end_ - in_begin_;
    std::uint32_t parts = 0;
    if (available < sizeof parts) return parsed::need_more;
    std::memcpy(&parts, at, sizeof parts);
    if (parts > max_parts) return stop(make_error_code(errc::malformed_message));
    auto head = sizeof parts + std::size_t{parts} * sizeof(std::uint64_t);
    if (available < head) return parsed::need_more;
    std::uint64_t sizes[max_parts];
    std::memcpy(sizes, at + sizeof parts, parts * sizeof(std::uint64_t));
    // Each size is checked against what is left of the limit, so the sum cannot wrap.
    std::size_t payload = 0;
    for (std::uint32_t i = 0; i < parts; ++i) {
      if (sizes[i] > max_message_bytes_ - payload) {
        logf(log_level::warn, "a direct link's peer announced a message over ", max_message_bytes_,
             " bytes, the most this link takes (max_message_bytes, or less before the peer proved itself); link closed");
        return stop(make_error_code(errc::message_too_large));
      }
      payload += sizes[i];
    }
    if (payload >= direct_read_bytes || head + payload > buffer_bytes) {
      in_begin_ += head;
      auto r = read_body(sizes, parts);
      if (r != parsed::need_more) return r;
      continue;  // it was all in the buffer already
    }
    if (available - head < payload) return parsed::need_more;
    multipart m;
    m.reserve(parts);
    const char* data = at + head;
    for (std::uint32_t i = 0; i < parts; ++i) {
      m.emplace_back(data, sizes[i]);
      data += sizes[i];
    }
    in_begin_ += head + payload;
    if (!deliver(std::move(m))) return stop(asio::error::operation_aborted);  // the handler closed it
  }
}

// A large message: what the buffer holds is copied into its parts, the rest read straight into
// them. need_more: it was delivered at once; reading_body: the read goes on.
stream_reader::parsed stream_reader::read_body(const std::uint64_t* sizes, std::uint32_t parts) {
  body_.clear();
  body_.reserve(parts);
  std::vector<asio::mutable_buffer> rest;
  for (std::uint32_t i = 0; i < parts; ++i) {
    auto& part = body_.emplace_back(static_cast<std::size_t>(sizes[i]));
    auto take = std::min<std::size_t>(sizes[i], in_end_ - in_begin_);
    std::memcpy(part.data(), in_.get() + in_begin_, take);
    in_begin_ += take;
    if (take < sizes[i]) rest.emplace_back(static_cast<char*>(part.data()) + take, sizes[i] - take);
  }
  if (rest.empty()) {
    if (!deliver(std::move(body_))) return stop(asio::error::operation_aborted);
    return parsed::need_more;
  }
  if (tls_ || lane_) {
    rest_ = std::move(rest);
    if (lane_)
      read_body_lane();
    else
      read_body_tls();
    return parsed::reading_body;
  }
  asio::async_read(socket_, rest, [this, keep = keep()](std::error_code ec, std::size_t) {
    if (ec) return closed(ec);
    if (!deliver(std::move(body_))) return void(stop(asio::error::operation_aborted));
    if (parse() == parsed::need_more) read_some();
  });
  return parsed::reading_body;
}

// ---- reading an encrypted link: the socket's bytes go into the session, and what it decrypts
// into the read buffer (or straight into a large message's parts), as for a plain link.

bool stream_reader::pull_cipher() {
  // A few reads at most before decrypting: what waits in the session stays small.
  for (int reads = 0; reads < 4; ++reads) {
    auto n = ::recv(socket_.native_handle(), cipher_.get(), buffer_bytes, MSG_DONTWAIT);
    if (n > 0) {
      std::lock_guard lock(tls_mutex_);  // the session is not for two threads at once
      tls_->feed(cipher_.get(), static_cast<std::size_t>(n));
      last_heard_ = clock::now();
      if (static_cast<std::size_t>(n) < buffer_bytes) return true;
      continue;
    }
    if (n == 0) {
      closed(asio::error::eof);
      return false;
    }
    if (errno == EINTR) {
      --reads;
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    closed(std::error_code(errno, std::system_category()));
    return false;
  }
  return true;
}

long stream_reader::open_tls(void* dst, std::size_t capacity) {
  // A worker's pulse thread encrypts on the same session (send_pulse, under this lock too):
  // OpenSSL's session takes one thread at a time.
  std::lock_guard lock(tls_mutex_);
  return tls_->open(dst, capacity);
}

void stream_reader::tls_failed() {
  if (tls_->closed_by_peer()) {
    closed(asio::error::eof);
    return;
  }
  logf(log_level::warn, "an encrypted link closed: ", tls_->failure());
  stop(make_error_code(errc::protocol_error));
}

void stream_reader::read_tls() {
  for (;;) {
    make_room();
    if (in_end_ == buffer_bytes) return void(stop(make_error_code(errc::malformed_message)));
    long n = open_tls(in_.get() + in_end_, buffer_bytes - in_end_);
    if (n < 0) return tls_failed();
    if (n == 0) break;
    in_end_ += static_cast<std::size_t>(n);
    if (parse() != parsed::need_more) return;  // stopped, or reading a large message
  }
  socket_.async_wait(asio::socket_base::wait_read, [this, keep = keep()](std::error_code ec) {
    if (ec) return closed(ec);
    if (pull_cipher()) read_tls();
  });
}

void stream_reader::read_body_tls() {
  while (!rest_.empty()) {
    auto& b = rest_.front();
    long n = open_tls(b.data(), b.size());
    if (n < 0) return tls_failed();
    if (n == 0) {
      socket_.async_wait(asio::socket_base::wait_read, [this, keep = keep()](std::error_code ec) {
        if (ec) return closed(ec);
        if (pull_cipher()) read_body_tls();
      });
      return;
    }
    b += static_cast<std::size_t>(n);
    if (b.size() == 0) rest_.erase(rest_.begin());
  }
  if (!deliver(std::move(body_))) return void(stop(asio::error::operation_aborted));
  if (parse() == parsed::need_more) read_some();
}

// ---- reading through a shared-memory lane: the ring's bytes are copied into the read buffer (or
// a large message's parts) and parsed there, as a socket's; the socket only says when the peer
// ended, and what its ring still held is read first.

void stream_reader::read_lane() {
  if (!watching_socket_) watch_socket();
  for (;;) {
    make_room();
    auto n = lane_->read(in_.get() + in_end_, buffer_bytes - in_end_);
    if (n == 0) break;
    in_end_ += n;
    if (heard_tracked_) last_heard_ = clock::now();
    if (parse() != parsed::need_more) return;  // stopped, or reading a large message
  }
  if (ended_) return closed(*ended_);
  lane_->when_readable([this, keep = keep()] { read_lane(); });
}

void stream_reader::read_body_lane() {
  reading_body_ = true;
  while (!rest_.empty()) {
    auto& b = rest_.front();
    auto n = lane_->read(static_cast<char*>(b.data()), b.size());
    if (n == 0) {
      if (ended_) {
        reading_body_ = false;
        return closed(*ended_);  // the peer ended in the middle of a message
      }
      lane_->when_readable([this, keep = keep()] { read_body_lane(); });
      return;
    }
    b += n;
    if (b.size() == 0) rest_.erase(rest_.begin());
  }
  reading_body_ = false;
  if (!deliver(std::move(body_))) return void(stop(asio::error::operation_aborted));
  if (parse() == parsed::need_more) read_some();
}

void stream_reader::watch_socket() {
  watching_socket_ = true;
  socket_.async_wait(asio::socket_base::wait_read, [this, keep = keep()](std::error_code ec) {
    if (ec == asio::error::operation_aborted || !socket_.is_open()) return closed(asio::error::operation_aborted);
    if (ec) return lane_ended(ec);
    char byte;
    auto n = ::recv(socket_.native_handle(), &byte, 1, MSG_DONTWAIT | MSG_PEEK);
    if (n > 0) {
      logf(log_level::warn, "a link's peer wrote to its socket after their bytes moved to shared memory; link closed");
      return void(stop(make_error_code(errc::protocol_error)));
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return watch_socket();
    lane_ended(n == 0 ? std::error_code(asio::error::eof) : std::error_code(errno, std::system_category()));
  });
}

void stream_reader::lane_ended(std::error_code why) {
  ended_ = why;
  lane_->forget_readable();  // read now instead
  if (reading_body_)
    read_body_lane();
  else
    read_lane();
}

}  // namespace fiber::detail
