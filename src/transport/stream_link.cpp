#include "transport/stream_link.hpp"

#include <asio/write.hpp>
#include <poll.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "fiber/error.hpp"
#include "core/log.hpp"

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

stream_link::stream_link(asio::local::stream_protocol::socket socket, std::size_t max_message_bytes)
    : socket_(std::move(socket)), max_message_bytes_(max_message_bytes) {}

void stream_link::start(on_message_fn on_message, on_closed_fn on_closed) {
  on_message_ = std::move(on_message);
  on_closed_ = std::move(on_closed);
  read_some();
}

void stream_link::closed(std::error_code ec) {
  if (auto f = std::move(on_closed_)) {
    on_closed_ = nullptr;
    f(ec);
  }
}

bool stream_link::stop(std::error_code why) {
  close();
  closed(why);
  return false;
}

void stream_link::read_some() {
  socket_.async_read_some(asio::buffer(buffer_), [self = shared_from_this()](std::error_code ec, std::size_t n) {
    if (ec) return self->closed(ec);
    self->in_.append(self->buffer_, n);
    if (self->parse()) self->read_some();
  });
}

bool stream_link::parse() {
  std::size_t pos = 0;
  for (;;) {
    std::uint32_t parts = 0;
    if (in_.size() - pos < sizeof parts) break;
    std::memcpy(&parts, in_.data() + pos, sizeof parts);
    if (parts > max_parts) return stop(make_error_code(errc::malformed_message));
    auto head = sizeof parts + std::size_t{parts} * sizeof(std::uint64_t);
    if (in_.size() - pos < head) break;
    std::vector<std::uint64_t> sizes(parts);
    std::memcpy(sizes.data(), in_.data() + pos + sizeof parts, parts * sizeof(std::uint64_t));
    // Each size is checked against what is left of the limit, so the sum cannot wrap.
    std::size_t payload = 0;
    for (auto s : sizes) {
      if (s > max_message_bytes_ - payload) {
        logf(log_level::warn, "a direct link's peer announced a message over ", max_message_bytes_,
             " bytes (max_message_bytes); link closed");
        return stop(make_error_code(errc::message_too_large));
      }
      payload += s;
    }
    if (in_.size() - pos - head < payload) break;
    multipart m;
    auto at = pos + head;
    for (auto s : sizes) {
      m.emplace_back(in_.data() + at, s);
      at += s;
    }
    pos += head + payload;
    if (on_message_) on_message_(std::move(m));
    if (!socket_.is_open()) return stop(asio::error::operation_aborted);  // the handler closed it: nothing more
  }
  in_.erase(0, pos);
  return true;
}

void stream_link::send(multipart&& parts) {
  auto head = frame_head(parts);
  out_.emplace_back(std::move(head), std::move(parts));
  if (!writing_) write_next();
}

void stream_link::write_next() {
  if (out_.empty()) {
    writing_ = false;
    return;
  }
  writing_ = true;
  std::vector<asio::const_buffer> buffers;
  auto& [head, parts] = out_.front();
  buffers.emplace_back(asio::buffer(head));
  for (auto& p : parts) buffers.emplace_back(p.data(), p.size());
  asio::async_write(socket_, buffers, [self = shared_from_this()](std::error_code ec, std::size_t) {
    self->out_.pop_front();
    if (ec) {
      self->out_.clear();
      self->writing_ = false;
      return;  // the reader reports the close
    }
    self->write_next();
  });
}

std::error_code stream_link::send_blocking(const multipart& parts) {
  auto head = frame_head(parts);
  std::vector<iovec> iov;
  iov.push_back({head.data(), head.size()});
  for (auto& p : parts) iov.push_back({const_cast<void*>(p.data()), p.size()});
  std::size_t first = 0;
  int fd = socket_.native_handle();
  while (first < iov.size()) {
    auto n = ::writev(fd, iov.data() + first, static_cast<int>(std::min<std::size_t>(iov.size() - first, IOV_MAX)));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, -1);
        continue;
      }
      return {errno, std::system_category()};
    }
    auto left = static_cast<std::size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (first < iov.size()) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return {};
}

void stream_link::close() {
  std::error_code ignored;
  socket_.close(ignored);
}

}  // namespace fiber::detail
