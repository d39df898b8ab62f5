#include "transport/stream_link.hpp"

#include <asio/post.hpp>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include "core/log.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

std::string frame_head(const multipart& parts) {
  std::string head(sizeof(std::uint32_t) + parts.size() * sizeof(std::uint64_t), '\0');
  auto n = static_cast<std::uint32_t>(parts.size());
  std::memcpy(head.data(), &n, sizeof n);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    std::uint64_t size = parts[i].size();
    std::memcpy(head.data() + sizeof n + i * sizeof size, &size, sizeof size);
  }
  return head;
}

namespace {
/// One sendmsg of `iov` without blocking and without SIGPIPE: bytes written, or -errno.
ssize_t write_vector(int fd, iovec* iov, std::size_t count) {
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = std::min<std::size_t>(count, IOV_MAX);
  for (;;) {
    auto n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno != EINTR) return -errno;
  }
}

void add_message(std::vector<iovec>& iov, const std::string& head, const multipart& parts, std::size_t skip) {
  auto add = [&](const void* data, std::size_t size) {
    if (skip >= size) {
      skip -= size;
      return;
    }
    iov.push_back({const_cast<char*>(static_cast<const char*>(data)) + skip, size - skip});
    skip = 0;
  };
  add(head.data(), head.size());
  for (auto& p : parts) add(p.data(), p.size());
}

/// A full lane, for a thread outside the loop: waits a slice for room, so that the caller's next
/// put_bytes looks at the socket between slices (a ring whose reader ended never drains). False
/// once `deadline` has passed.
bool wait_lane_room(shared_lane& lane, std::optional<stream_link::clock::time_point> deadline) {
  auto now = stream_link::clock::now();
  if (deadline && now >= *deadline) return false;
  auto slice = now + std::chrono::milliseconds(10);
  lane.wait_writable(deadline ? std::min(*deadline, slice) : slice);
  return true;
}

std::size_t message_bytes(const std::string& head, const multipart& parts) {
  std::size_t n = head.size();
  for (auto& p : parts) n += p.size();
  return n;
}
}  // namespace

namespace {
stream_link::socket_type generic_of(asio::local::stream_protocol::socket s) {
  auto executor = s.get_executor();
  return stream_link::socket_type(executor, asio::generic::stream_protocol(AF_UNIX, SOCK_STREAM), s.release());
}
}  // namespace

stream_link::stream_link(asio::local::stream_protocol::socket socket, std::size_t max_message_bytes)
    : stream_link(generic_of(std::move(socket)), max_message_bytes) {}

stream_link::stream_link(socket_type socket, std::size_t max_message_bytes, std::unique_ptr<tls_session> tls)
    : socket_(std::move(socket)),
      tls_(std::move(tls)),
      reader_(socket_, tls_.get(), write_mutex_, max_message_bytes, [this] { close(); }) {}

void stream_link::start(on_message_fn on_message, on_closed_fn on_closed) {
  reader_.start(weak_from_this(), std::move(on_message), std::move(on_closed));
}

// ---- writing

std::string stream_link::sealed(const std::string& head, const multipart& parts) {
  auto total = message_bytes(head, parts);
  tls_->reserve_output(total + total / 512 + 64);  // a record's header and tag: 22 bytes in 16 KiB
  if (total <= std::size_t{16} * 1024) {  // one record: small messages cost one encryption
    thread_local std::string plain;
    plain.clear();
    plain.append(head);
    for (auto& p : parts) plain.append(static_cast<const char*>(p.data()), p.size());
    tls_->seal(plain.data(), plain.size());
  } else {
    tls_->seal(head.data(), head.size());
    for (auto& p : parts) tls_->seal(p.data(), p.size());
  }
  std::string out;
  tls_->take_output(out);
  return out;
}

std::error_code stream_link::send(multipart&& parts) {
  std::lock_guard lock(write_mutex_);
  if (broken_) return broken_;
  if (!socket_.is_open()) return asio::error::bad_descriptor;
  auto head = frame_head(parts);
  if (coalescing_) {
    if (message_bytes(head, parts) <= direct_read_bytes) {
      batch_.append(head);
      for (auto& p : parts) batch_.append(static_cast<const char*>(p.data()), p.size());
      note_sent();
      if (!flush_posted_) {
        flush_posted_ = true;
        // After the handlers this turn made ready: what they send goes in the same write.
        asio::post(socket_.get_executor(), [weak = weak_from_this()] {
          if (auto self = weak.lock()) {
            std::lock_guard posted(self->write_mutex_);
            self->flush_posted_ = false;
            (void)self->flush_batch();
          }
        });
      }
      return {};
    }
    if (auto ec = flush_batch()) return ec;  // what came before goes first
  }
  note_sent();
  if (!tls_) return write_or_queue(std::move(head), parts);
  multipart none;
  return write_or_queue(sealed(head, parts), none);
}

std::error_code stream_link::flush_batch() {
  if (batch_.empty() || broken_) return broken_;
  std::string head;
  if (tls_) {
    tls_->reserve_output(batch_.size() + batch_.size() / 512 + 64);
    tls_->seal(batch_.data(), batch_.size());  // records of up to 16 KiB
    tls_->take_output(head);
    batch_.clear();
  } else {
    head.swap(batch_);
  }
  multipart none;
  return write_or_queue(std::move(head), none);
}

std::error_code stream_link::write_or_queue(std::string&& head, multipart& parts) {
  std::size_t written = 0;
  if (out_.empty()) {  // write at once what the socket takes
    std::vector<iovec> iov;
    iov.reserve(parts.size() + 1);
    add_message(iov, head, parts, 0);
    auto n = put_bytes(iov.data(), iov.size());
    if (n < 0 && n != -EAGAIN && n != -EWOULDBLOCK) return broken_ = std::error_code(static_cast<int>(-n), std::system_category());
    written = n > 0 ? static_cast<std::size_t>(n) : 0;
    if (written == message_bytes(head, parts)) return {};
  }
  out_.push_back({std::move(head), std::move(parts)});
  if (out_.size() == 1) front_written_ = written;
  if (!write_waiting_) wait_writable();
  return {};
}

void stream_link::consume_written(std::size_t n) {
  while (n > 0 && !out_.empty()) {
    auto left = message_bytes(out_.front().head, out_.front().parts) - front_written_;
    if (n < left) {
      front_written_ += n;
      return;
    }
    n -= left;
    out_.pop_front();
    front_written_ = 0;
  }
}

std::error_code stream_link::write_queued() {
  std::lock_guard lock(write_mutex_);
  std::vector<iovec> iov;
  while (!out_.empty()) {
    iov.clear();
    std::size_t skip = front_written_;
    for (auto& m : out_) {
      add_message(iov, m.head, m.parts, skip);
      skip = 0;
      if (iov.size() >= IOV_MAX) break;
    }
    auto n = put_bytes(iov.data(), iov.size());
    if (n == -EAGAIN || n == -EWOULDBLOCK) return {};
    if (n < 0) {
      broken_ = std::error_code(static_cast<int>(-n), std::system_category());
      out_.clear();  // the reader reports the close
      return broken_;
    }
    consume_written(static_cast<std::size_t>(n));
  }
  return {};
}

ssize_t stream_link::put_bytes(iovec* iov, std::size_t count) {
  writes_.fetch_add(1, std::memory_order_relaxed);
  if (!lane_) return write_vector(socket_.native_handle(), iov, count);
  // A socket refuses bytes for a peer that ended; a ring would take them, and they would be lost
  // unseen (a queue's item, which the master gives the next reader when the send fails). One
  // poll of the socket keeps that: far cheaper than the send it replaces, and no wake-up.
  pollfd p{socket_.native_handle(), POLLRDHUP, 0};
  if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) return -EPIPE;
  auto n = lane_->write(iov, count);
  return n > 0 ? static_cast<ssize_t>(n) : -EAGAIN;
}

bool stream_link::use_lane(std::shared_ptr<shared_lane> lane) {
  std::lock_guard lock(write_mutex_);
  if (!out_.empty() || !batch_.empty() || tls_ || !lane) return false;
  lane_ = lane;
  reader_.use_lane(std::move(lane));
  return true;
}

void stream_link::wait_writable() {
  write_waiting_ = true;
  if (lane_) {
    lane_->when_writable([self = shared_from_this()] {
      std::lock_guard lock(self->write_mutex_);
      self->write_waiting_ = false;
      if (self->broken_) return;
      self->write_queued();
      if (!self->out_.empty() && !self->broken_) self->wait_writable();
    });
    return;
  }
  socket_.async_wait(asio::socket_base::wait_write, [self = shared_from_this()](std::error_code ec) {
    std::lock_guard lock(self->write_mutex_);
    self->write_waiting_ = false;
    if (ec || self->broken_) return;
    self->write_queued();
    if (!self->out_.empty() && !self->broken_) self->wait_writable();
  });
}

bool stream_link::flush(std::chrono::milliseconds limit) {
  std::lock_guard lock(write_mutex_);
  if (flush_batch()) return false;
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!out_.empty() && !broken_ && socket_.is_open()) {
    if (write_queued()) return false;
    if (out_.empty()) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (lane_) {
      wait_lane_room(*lane_, deadline);
      continue;
    }
    pollfd p{socket_.native_handle(), POLLOUT, 0};
    ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), INT_MAX)));
  }
  return out_.empty();
}

std::error_code stream_link::send_blocking(const multipart& parts) {
  std::lock_guard lock(write_mutex_);
  if (auto ec = flush_batch()) return ec;
  return write_all(parts, std::nullopt);
}

bool stream_link::send_pulse(const multipart& parts, std::chrono::milliseconds limit) {
  std::lock_guard lock(write_mutex_);
  if (broken_ || !socket_.is_open()) return false;
  if (!out_.empty() || !batch_.empty()) return true;  // bytes wait to be read or written: they will be heard
  return !write_all(parts, clock::now() + limit);
}

std::error_code stream_link::write_all(const multipart& parts, std::optional<clock::time_point> deadline) {
  auto head = frame_head(parts);
  static const multipart none;
  if (tls_) head = sealed(head, parts);
  const multipart& body = tls_ ? none : parts;
  note_sent();
  std::vector<iovec> iov;
  add_message(iov, head, body, 0);
  std::size_t first = 0;
  int fd = socket_.native_handle();
  while (first < iov.size()) {
    auto n = put_bytes(iov.data() + first, iov.size() - first);
    if ((n == -EAGAIN || n == -EWOULDBLOCK) && lane_) {
      if (!wait_lane_room(*lane_, deadline)) return broken_ = make_error_code(std::errc::timed_out);
      continue;
    }
    if (n == -EAGAIN || n == -EWOULDBLOCK) {
      int wait = -1;
      if (deadline) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - clock::now()).count();
        if (left <= 0) return broken_ = make_error_code(std::errc::timed_out);  // a frame half written ends the link
        wait = static_cast<int>(std::min<long long>(left, INT_MAX));
      }
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, wait);
      continue;
    }
    if (n < 0) return {static_cast<int>(-n), std::system_category()};
    auto left = static_cast<std::size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (first < iov.size()) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return {};
}

bool stream_link::bytes_waiting() noexcept {
  int n = 0;
  if (lane_ && socket_.is_open() && lane_->can_read()) return true;
  return socket_.is_open() && ::ioctl(socket_.native_handle(), FIONREAD, &n) == 0 && n > 0;
}

void stream_link::close() {
  std::lock_guard lock(write_mutex_);  // not while a pulse writes on another thread
  std::error_code ignored;
  socket_.close(ignored);
  if (lane_) lane_->close();
}

}  // namespace fiber::detail
