// Type-erased message channels behind simple_queue and pipe (implemented in src/primitives).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <variant>
#include <vector>

#include "fiber/codec.hpp"
#include "fiber/detail/completion.hpp"
#include "fiber/detail/message.hpp"
#include "fiber/op.hpp"
#include "fiber/detail/export.hpp"

namespace fiber::detail {
class runtime;

FIBER_API std::uint64_t new_channel_id(runtime& rt);
/// On fiber's loop: hands the encoded message to the channel's owner; done once it is on its way.
FIBER_API std::shared_ptr<completion<std::monostate>> channel_put(runtime& rt, std::uint64_t channel, writer& w);
/// On fiber's loop: takes the next message; with a timeout, nullopt when none came in time.
FIBER_API std::shared_ptr<completion<std::optional<message>>> channel_get(runtime& rt, std::uint64_t channel,
                                                                std::optional<std::chrono::milliseconds> timeout);
/// Releases the channel's storage at its owner (messages still queued are dropped and logged).
FIBER_API void channel_release(runtime& rt, std::uint64_t channel) noexcept;

/// Encodes a value it owns, so large ranges go out without copies.
template <class T>
std::shared_ptr<writer> encode_owned(T&& value) {
  auto keep = std::make_shared<std::remove_cvref_t<T>>(std::forward<T>(value));
  auto w = std::make_shared<writer>(keep);
  w->value(*keep);
  return w;
}

/// put/get of values of type T over a channel: what simple_queue and pipe ends share.
template <class T>
struct channel_ops {
  // The starts hold a plain pointer: deferred_op keeps the runtime for as long as they can run.
  static op<void> put(const std::shared_ptr<runtime>& rt, std::uint64_t channel, T value) {
    return deferred_op<void>(rt, [r = rt.get(), channel, w = encode_owned(std::move(value))] { return channel_put(*r, channel, *w); });
  }
  static op<T> get(const std::shared_ptr<runtime>& rt, std::uint64_t channel) {
    return deferred_op<T>(
        rt, [r = rt.get(), channel] { return channel_get(*r, channel, std::nullopt); },
        [](std::optional<message>&& m) { return decode_message<T>(*m); });
  }
  static op<std::optional<T>> get(const std::shared_ptr<runtime>& rt, std::uint64_t channel,
                                  std::chrono::milliseconds timeout) {
    return deferred_op<std::optional<T>>(
        rt, [r = rt.get(), channel, timeout] { return channel_get(*r, channel, timeout); },
        [](std::optional<message>&& m) -> std::optional<T> {
          if (!m) return std::nullopt;
          return decode_message<T>(*m);
        });
  }
};

}  // namespace fiber::detail
