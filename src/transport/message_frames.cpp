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

multipart to_frames(writer& w) {
  multipart out;
  out.reserve(1 + w.blobs().size());
  auto& head = w.head();
  out.emplace_back(head.data(), head.size());
  for (auto& b : w.blobs()) {
    // Zero-copy: ZeroMQ frees the frame by dropping our reference to its owner.
    auto* keep = new std::shared_ptr<const void>(b.keep);
    out.emplace_back(const_cast<std::byte*>(b.data), b.size,
                     [](void*, void* hint) { delete static_cast<std::shared_ptr<const void>*>(hint); }, keep);
  }
  return out;
}

}  // namespace fiber::detail
