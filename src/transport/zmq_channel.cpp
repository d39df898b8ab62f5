#include "transport/zmq_channel.hpp"

#include <asio/error.hpp>

namespace fiber::detail {

zmq_channel::zmq_channel(asio::io_context& io, zmq::socket_t socket)
    : io_(io), socket_(std::move(socket)), fd_(io, socket_.get(zmq::sockopt::fd)) {}

zmq_channel::~zmq_channel() { close(); }

void zmq_channel::close() {
  if (closed_) return;
  closed_ = true;
  std::error_code ignored;
  fd_.cancel(ignored);
  fd_.release();  // the descriptor belongs to ZeroMQ: never close it
  if (pending_) {
    auto h = std::move(pending_);
    pending_ = nullptr;
    h(asio::error::operation_aborted, {}, false);
  }
  outbox_.clear();
  socket_.close();
}

std::error_code zmq_channel::send(multipart&& parts) {
  if (closed_) return asio::error::bad_descriptor;
  if (!outbox_.empty()) {
    outbox_.push_back(std::move(parts));
    arm();
    return {};
  }
  for (std::size_t i = 0; i < parts.size(); ++i) {
    auto flags = zmq::send_flags::dontwait | (i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    try {
      if (!socket_.send(parts[i], flags)) {
        if (i != 0) {  // ZeroMQ takes the rest of a started multipart message without blocking
          return std::make_error_code(std::errc::resource_unavailable_try_again);
        }
        outbox_.push_back(std::move(parts));
        arm();
        return {};
      }
    } catch (const zmq::error_t& e) {
      return std::error_code(e.num(), std::generic_category());
    }
  }
  if (pending_) on_ready();  // the send may have eaten the edge of an arrived message
  return {};
}

bool zmq_channel::try_receive(multipart& out) {
  out.clear();
  for (;;) {
    zmq::message_t m;
    auto r = socket_.recv(m, zmq::recv_flags::dontwait);
    if (!r) return false;  // only possible on the first part
    bool more = m.more();
    out.push_back(std::move(m));
    if (!more) return true;
  }
}

void zmq_channel::start_receive(receive_handler h) {
  if (closed_) {
    h(asio::error::operation_aborted, {}, false);
    return;
  }
  if (pending_) {
    h(asio::error::already_started, {}, false);
    return;
  }
  multipart m;
  try {
    if (try_receive(m)) {
      h({}, std::move(m), false);
      return;
    }
  } catch (const zmq::error_t& e) {
    h(std::error_code(e.num(), std::generic_category()), {}, false);
    return;
  }
  pending_ = std::move(h);
  arm();
}

void zmq_channel::cancel_receive() {
  if (!pending_) return;
  auto h = std::move(pending_);
  pending_ = nullptr;
  h(asio::error::operation_aborted, {}, false);
}

void zmq_channel::flush_outbox() {
  while (!outbox_.empty()) {
    auto& parts = outbox_.front();
    auto first = zmq::send_flags::dontwait | (parts.size() > 1 ? zmq::send_flags::sndmore : zmq::send_flags::none);
    if (!socket_.send(parts[0], first)) return;
    for (std::size_t i = 1; i < parts.size(); ++i)
      socket_.send(parts[i], i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    outbox_.pop_front();
  }
}

void zmq_channel::on_ready() {
  if (closed_) return;
  try {
    flush_outbox();
    if (pending_) {
      multipart m;
      if (try_receive(m)) {
        auto h = std::move(pending_);
        pending_ = nullptr;
        h({}, std::move(m), from_callback_);
      }
    }
  } catch (const zmq::error_t& e) {
    if (pending_) {
      auto h = std::move(pending_);
      pending_ = nullptr;
      h(std::error_code(e.num(), std::generic_category()), {}, false);
    }
  }
  if (pending_ || !outbox_.empty()) arm();
}

void zmq_channel::arm() {
  if (waiting_ || closed_) return;
  waiting_ = true;
  fd_.async_wait(asio::posix::stream_descriptor::wait_read, [weak = weak_from_this()](std::error_code ec) {
    auto self = weak.lock();
    if (!self) return;
    self->waiting_ = false;
    if (ec == asio::error::operation_aborted) return;
    self->from_callback_ = true;
    self->on_ready();
    self->from_callback_ = false;
  });
}

}  // namespace fiber::detail
