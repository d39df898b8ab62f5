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
#include "fiber/detail/message.hpp"
#include "fiber/op.hpp"

namespace fiber::detail {
class runtime;

std::uint64_t new_channel_id(runtime& rt);
/// Hands the encoded message to the channel's owner; completes once it is on its way.
asio::awaitable<void> channel_put(std::shared_ptr<runtime> rt, std::uint64_t channel, std::shared_ptr<writer> w);
void channel_put_blocking(runtime& rt, std::uint64_t channel, writer& w);
/// Takes the next message; with a timeout, nullopt when none came in time.
asio::awaitable<std::optional<message>> channel_get(std::shared_ptr<runtime> rt, std::uint64_t channel,
                                                    std::optional<std::chrono::milliseconds> timeout);
std::optional<message> channel_get_blocking(runtime& rt, std::uint64_t channel,
                                            std::optional<std::chrono::milliseconds> timeout);
/// Releases the channel's storage at its owner (messages still queued are dropped and logged).
void channel_release(runtime& rt, std::uint64_t channel) noexcept;

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
  static op<void> put(const std::shared_ptr<runtime>& rt, std::uint64_t channel, T value) {
    auto w = encode_owned(std::move(value));
    return {rt, channel_put(rt, channel, w), [rt, channel, w] { channel_put_blocking(*rt, channel, *w); }};
  }
  static op<T> get(const std::shared_ptr<runtime>& rt, std::uint64_t channel) {
    return {rt, get_impl(rt, channel), [rt, channel] {
              return decode_message<T>(*channel_get_blocking(*rt, channel, std::nullopt));
            }};
  }
  static op<std::optional<T>> get(const std::shared_ptr<runtime>& rt, std::uint64_t channel,
                                  std::chrono::milliseconds timeout) {
    return {rt, get_for_impl(rt, channel, timeout), [rt, channel, timeout]() -> std::optional<T> {
              auto m = channel_get_blocking(*rt, channel, timeout);
              if (!m) return std::nullopt;
              return decode_message<T>(*m);
            }};
  }

 private:
  static asio::awaitable<T> get_impl(std::shared_ptr<runtime> rt, std::uint64_t channel) {
    auto m = co_await channel_get(rt, channel, std::nullopt);
    co_return decode_message<T>(*m);
  }
  static asio::awaitable<std::optional<T>> get_for_impl(std::shared_ptr<runtime> rt, std::uint64_t channel,
                                                        std::chrono::milliseconds timeout) {
    auto m = co_await channel_get(rt, channel, timeout);
    if (!m) co_return std::nullopt;
    co_return decode_message<T>(*m);
  }
};

}  // namespace fiber::detail
