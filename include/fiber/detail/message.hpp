// A received message, as every primitive hands it to decoding: spans into the frames it arrived in.
#pragma once
#include <cstddef>
#include <memory>
#include <span>

#include "fiber/codec.hpp"
#include "fiber/error.hpp"
#include "fiber/detail/export.hpp"

namespace fiber::detail {

/// A received message: its frames stay in ZeroMQ's buffers until it is destroyed.
class FIBER_API message {
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

}  // namespace fiber::detail
