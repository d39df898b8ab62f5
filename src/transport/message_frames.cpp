#include "transport/message_frames.hpp"

namespace fiber::detail {

std::span<const std::byte> message::head() const noexcept {
  if (!frames_) return {};
  return frames_->head;
}

std::span<const std::span<const std::byte>> message::blobs() const noexcept {
  if (!frames_) return {};
  return frames_->blob_spans;
}

namespace {
void release_owner(void*, void* hint) { delete static_cast<std::shared_ptr<const void>*>(hint); }
/// A frame over `size` bytes at `data`, which `owner` keeps alive.
zmq::message_t shared_frame(const void* data, std::size_t size, std::shared_ptr<const void> owner) {
  if (size == 0) return zmq::message_t();
  return zmq::message_t(const_cast<void*>(data), size, &release_owner, new std::shared_ptr<const void>(std::move(owner)));
}
}  // namespace

multipart to_frames(writer& w) {
  multipart out;
  out.reserve(1 + w.blobs().size());
  auto& head = w.head();
  out.emplace_back(head.data(), head.size());
  for (auto& b : w.blobs()) {
    // Zero-copy: ZeroMQ frees the frame by dropping our reference to its owner.
    out.push_back(shared_frame(b.data, b.size, b.keep));
  }
  return out;
}

multipart to_shared_frames(const std::shared_ptr<writer>& w) {
  multipart out;
  out.reserve(1 + w->blobs().size());
  auto& head = w->head();
  out.push_back(shared_frame(head.data(), head.size(), w));
  for (auto& b : w->blobs()) out.push_back(shared_frame(b.data, b.size, b.keep));
  return out;
}

}  // namespace fiber::detail
