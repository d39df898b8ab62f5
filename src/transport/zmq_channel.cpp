#include "transport/zmq_channel.hpp"

#include <asio/error.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/log.hpp"

namespace fiber::detail {

zmq_channel::zmq_channel(asio::io_context& io, zmq::socket_t socket)
    : io_(io), socket_(std::move(socket)), fd_(io, socket_.get(zmq::sockopt::fd)) {
  router_ = socket_.get(zmq::sockopt::type) == ZMQ_ROUTER;
}

namespace {
// The layout frame: magic, a reserved word, the number of parts, then each part's size. It is
// at least 32 bytes, so it cannot be taken for a message's first frame, a 24-byte header.
constexpr char layout_magic[8] = {'\xf1', 'B', 'S', 'P', 'L', 'I', 'T', '\x01'};
constexpr std::size_t layout_fixed = 24;
// A packed frame: the same layout with its own magic, the parts' bytes after it.
constexpr char packed_magic[8] = {'\xf1', 'B', 'S', 'P', 'A', 'C', 'K', '\x01'};

std::uint64_t word_at(const zmq::message_t& m, std::size_t at) {
  std::uint64_t w;
  std::memcpy(&w, static_cast<const char*>(m.data()) + at, sizeof w);
  return w;
}
}  // namespace

bool zmq_channel::needs_split(const multipart& parts) const {
  for (std::size_t i = router_ ? 1 : 0; i < parts.size(); ++i)
    if (parts[i].size() > max_frame_bytes) return true;
  return false;
}

bool zmq_channel::packs(const multipart& parts) const {
  std::size_t first = router_ ? 1 : 0;
  if (!pack_ || parts.size() < first + 2) return false;
  std::size_t total = 0;
  for (std::size_t i = first; i < parts.size(); ++i) total += parts[i].size();
  return total <= max_packed_bytes;
}

multipart zmq_channel::packed(const multipart& parts) const {
  std::size_t first = router_ ? 1 : 0;
  std::size_t total = 0;
  for (std::size_t i = first; i < parts.size(); ++i) total += parts[i].size();
  auto layout_bytes = layout_fixed + (parts.size() - first) * 8;
  zmq::message_t frame(layout_bytes + total);
  layout_of(parts, packed_magic, frame);
  auto* at = static_cast<char*>(frame.data()) + layout_bytes;
  for (std::size_t i = first; i < parts.size(); ++i) {
    if (!parts[i].empty()) std::memcpy(at, parts[i].data(), parts[i].size());
    at += parts[i].size();
  }
  multipart out;
  if (router_) out.emplace_back(parts[0].data(), parts[0].size());
  out.push_back(std::move(frame));
  return out;
}

zmq::message_t zmq_channel::layout_of(const multipart& parts) const {
  zmq::message_t layout(layout_fixed + (parts.size() - (router_ ? 1 : 0)) * 8);
  layout_of(parts, layout_magic, layout);
  return layout;
}

void zmq_channel::layout_of(const multipart& parts, const char* magic, zmq::message_t& into) const {
  std::size_t first = router_ ? 1 : 0;
  std::uint64_t count = parts.size() - first;
  auto* l = static_cast<char*>(into.data());
  std::memcpy(l, magic, 8);
  std::memset(l + 8, 0, 8);
  std::memcpy(l + 16, &count, 8);
  for (std::size_t i = first; i < parts.size(); ++i) {
    std::uint64_t size = parts[i].size();
    std::memcpy(l + layout_fixed + (i - first) * 8, &size, 8);
  }
}

void zmq_channel::append_pieces(multipart& parts, multipart& out) const {
  for (std::size_t i = router_ ? 1 : 0; i < parts.size(); ++i) {
    if (parts[i].size() <= max_frame_bytes) {
      out.push_back(std::move(parts[i]));
      continue;
    }
    // The pieces point into the part, which the last of them to be sent releases.
    auto whole = std::make_shared<zmq::message_t>(std::move(parts[i]));
    auto* data = static_cast<char*>(whole->data());
    for (std::size_t at = 0; at < whole->size(); at += max_frame_bytes) {
      auto* keep = new std::shared_ptr<zmq::message_t>(whole);
      out.emplace_back(data + at, std::min(max_frame_bytes, whole->size() - at),
                       [](void*, void* hint) { delete static_cast<std::shared_ptr<zmq::message_t>*>(hint); }, keep);
    }
  }
}

multipart zmq_channel::split(multipart&& parts) const {
  if (packs(parts)) return packed(parts);
  if (!needs_split(parts)) return std::move(parts);
  multipart out;
  if (router_ && !parts.empty()) out.push_back(std::move(parts[0]));
  out.push_back(layout_of(parts));
  append_pieces(parts, out);
  return out;
}

std::string zmq_channel::join(multipart& parts) const {
  static const std::string malformed = "whose pieces do not match its layout";
  std::size_t first = router_ ? 1 : 0;
  if (parts.size() <= first) return {};
  auto& layout = parts[first];
  if (layout.size() < layout_fixed + 8) return {};
  if (std::memcmp(layout.data(), packed_magic, 8) == 0) return unpack(parts);
  if (std::memcmp(layout.data(), layout_magic, 8) != 0) return {};
  auto count = word_at(layout, 16);
  if (count > layout.size() / 8 || layout.size() != layout_fixed + count * 8) return malformed;
  std::uint64_t total = 0;
  for (std::uint64_t k = 0; k < count; ++k) {
    auto size = word_at(layout, layout_fixed + k * 8);
    if (size > (std::uint64_t{1} << 50)) return malformed;
    total += size;
  }
  if (max_joined_ && total > max_joined_)
    return "of " + std::to_string(total) + " bytes, more than max_message_bytes allows (" + std::to_string(max_joined_) +
           "); the sender's limit is higher than this side's";
  multipart out;
  if (router_) out.push_back(std::move(parts[0]));
  std::size_t next = first + 1;
  for (std::uint64_t k = 0; k < count; ++k) {
    auto size = static_cast<std::size_t>(word_at(layout, layout_fixed + k * 8));
    if (size <= max_frame_bytes) {
      if (next >= parts.size() || parts[next].size() != size) return malformed;
      out.push_back(std::move(parts[next++]));
      continue;
    }
    zmq::message_t joined(size);
    auto* data = static_cast<char*>(joined.data());
    for (std::size_t at = 0; at < size; at += max_frame_bytes) {
      auto piece = std::min(max_frame_bytes, size - at);
      if (next >= parts.size() || parts[next].size() != piece) return malformed;
      std::memcpy(data + at, parts[next++].data(), piece);
    }
    out.push_back(std::move(joined));
  }
  if (next != parts.size()) return malformed;
  parts = std::move(out);
  return {};
}

std::string zmq_channel::unpack(multipart& parts) const {
  static const std::string malformed = "packed, whose parts do not match its layout";
  std::size_t first = router_ ? 1 : 0;
  if (parts.size() != first + 1) return malformed;
  auto& frame = parts[first];
  auto count = word_at(frame, 16);
  if (count > (frame.size() - layout_fixed) / 8) return malformed;
  auto layout_bytes = layout_fixed + count * 8;
  std::uint64_t total = 0;
  for (std::uint64_t k = 0; k < count; ++k) {
    auto size = word_at(frame, layout_fixed + k * 8);
    if (size > frame.size() - total) return malformed;  // not `total + size`: that can wrap
    total += size;
  }
  if (layout_bytes + total != frame.size()) return malformed;
  multipart out;
  out.reserve(first + count);
  if (router_) out.push_back(std::move(parts[0]));
  auto* at = static_cast<const char*>(frame.data()) + layout_bytes;
  for (std::uint64_t k = 0; k < count; ++k) {
    auto size = static_cast<std::size_t>(word_at(frame, layout_fixed + k * 8));
    out.emplace_back(at, size);
    at += size;
  }
  parts = std::move(out);
  return {};
}

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
  if (parts.empty()) return {};
  if (!outbox_.empty()) {
    outbox_.push_back(split(std::move(parts)));
    arm();
    return {};
  }
  // The first frame decides. Refused, it leaves `parts` as they came (a caller may keep them for
  // a resend elsewhere); taken, ZeroMQ takes the rest of the message without blocking.
  // Packed, the frames are a copy: the parts as they came are kept until it is taken.
  multipart as_given;
  if (packs(parts)) {
    as_given = std::move(parts);
    parts = packed(as_given);
  }
  bool large = needs_split(parts);
  zmq::message_t layout = large ? layout_of(parts) : zmq::message_t();
  bool layout_first = large && !router_;
  zmq::message_t& head = layout_first ? layout : parts[0];
  bool more = layout_first || parts.size() > 1;
  try {
    if (!socket_.send(head, zmq::send_flags::dontwait | (more ? zmq::send_flags::sndmore : zmq::send_flags::none))) {
      outbox_.push_back(split(std::move(parts)));
      arm();
      return {};
    }
    multipart rest;
    if (large) {
      if (router_) rest.push_back(std::move(layout));
      append_pieces(parts, rest);
    } else {
      for (std::size_t i = 1; i < parts.size(); ++i) rest.push_back(std::move(parts[i]));
    }
    for (std::size_t i = 0; i < rest.size(); ++i)
      if (!socket_.send(rest[i], i + 1 < rest.size() ? zmq::send_flags::sndmore : zmq::send_flags::none))
        return std::make_error_code(std::errc::resource_unavailable_try_again);  // not expected mid-message
  } catch (const zmq::error_t& e) {
    if (!as_given.empty()) parts = std::move(as_given);
    if (pending_) on_ready();  // a refused send (a peer gone) may have eaten that edge too
    return std::error_code(e.num(), std::generic_category());
  }
  if (pending_) on_ready();  // the send may have eaten the edge of an arrived message
  return {};
}

bool zmq_channel::try_receive(multipart& out) {
  for (;;) {
    out.clear();
    for (;;) {
      zmq::message_t m;
      auto r = socket_.recv(m, zmq::recv_flags::dontwait);
      if (!r) return false;  // only possible on the first part
      bool more = m.more();
      out.push_back(std::move(m));
      if (!more) break;
    }
    auto refused = join(out);
    if (refused.empty()) return true;
    // Nothing a fiber peer of this job sends: dropped, and the next message is read.
    logf(log_level::error, "dropped a message in pieces from a peer: ", refused);
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
