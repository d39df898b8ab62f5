// Type-erased message channels behind simple_queue and pipe (implemented in src/primitives).
#pragma once
#include <asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "fiber/codec.hpp"

namespace fiber::detail {
class runtime;

/// A received message: its frames stay in ZeroMQ's buffers until it is destroyed.
class message {
 public:
  struct frames;
  message() = default;
  explicit message(std::shared_ptr<frames> f) : frames_(std::move(f)) {}
  std::span<const std::byte> head() const noexcept;
  std::span<const std::span<const std::byte>> blobs() const noexcept;

 private:
  std::shared_ptr<frames> frames_;
};

template <class T>
T decode_message(const message& m) {
  reader r(m.head(), m.blobs());
  T v = r.value<T>();
  if (!r.at_end()) throw error(errc::malformed_message, "message carries trailing bytes: sender and receiver disagree on its type");
  return v;
}

std::uint64_t new_channel_id(runtime& rt);
/// Hands the encoded message to the channel's owner; completes once it is on its way.
asio::awaitable<void> channel_put(std::shared_ptr<runtime> rt, std::uint64_t channel, writer w);
/// Takes the next message; with a timeout, nullopt when none came in time.
asio::awaitable<std::optional<message>> channel_get(std::shared_ptr<runtime> rt, std::uint64_t channel,
                                                    std::optional<std::chrono::milliseconds> timeout);
/// Releases the channel's storage at its owner (messages still queued are dropped and logged).
void channel_release(runtime& rt, std::uint64_t channel) noexcept;

/// Encodes a value it owns, so large ranges go out without copies.
template <class T>
writer encode_owned(T&& value) {
  auto keep = std::make_shared<std::remove_cvref_t<T>>(std::forward<T>(value));
  writer w(keep);
  w.value(*keep);
  return w;
}

}  // namespace fiber::detail
