// Between an encoded value and ZeroMQ frames: a writer's output as frames to send, and the
// frames a message arrived in, kept alive behind fiber::detail::message.
#pragma once
#include <memory>
#include <span>
#include <vector>

#include "fiber/codec.hpp"
#include "fiber/detail/message.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {

/// A received message: spans into frames it keeps alive (whole frames, or a slice of a frame
/// shared with other messages, as pool results are).
struct message::frames {
  std::shared_ptr<multipart> parts;
  std::span<const std::byte> head;
  std::vector<std::span<const std::byte>> blob_spans;
  /// head = the first frame, blobs = the others.
  static std::shared_ptr<frames> whole(multipart&& payload) {
    auto f = std::make_shared<frames>();
    f->parts = std::make_shared<multipart>(std::move(payload));
    auto& p = *f->parts;
    if (!p.empty()) f->head = {static_cast<const std::byte*>(p[0].data()), p[0].size()};
    for (std::size_t i = 1; i < p.size(); ++i) f->blob_spans.emplace_back(static_cast<const std::byte*>(p[i].data()), p[i].size());
    return f;
  }
};

/// Encoded value as payload frames (head first); large ranges go without copies when the writer
/// owns them.
multipart to_frames(writer& w);
/// The same without copying the inline part either: every frame references `w`'s memory and
/// keeps `w` alive until ZeroMQ has sent it, so a message kept for a resend is framed again at
/// no cost.
multipart to_shared_frames(const std::shared_ptr<writer>& w);

}  // namespace fiber::detail
