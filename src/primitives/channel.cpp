// Queue and pipe operations (fiber/detail/channel.hpp): puts and gets on the runtime's broker,
// each completing a completion that deferred_op makes an op of.
#include <asio/post.hpp>

#include "fiber/detail/channel.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {

std::uint64_t new_channel_id(runtime& rt) { return rt.new_channel_id(); }

void channel_release(runtime& rt, std::uint64_t channel) noexcept {
  if (rt.loop().in_loop_thread()) {
    rt.release(channel);
    return;
  }
  asio::post(rt.io(), [weak = rt.weak_from_this(), channel] {
    if (auto self = weak.lock()) self->release(channel);
  });
}

std::shared_ptr<completion<std::monostate>> channel_put(runtime& rt, std::uint64_t channel, writer& w) {
  auto c = std::make_shared<completion<std::monostate>>();
  rt.put(channel, w);  // throws what the put refuses (too large, closed): the op's error
  c->set_value({});
  return c;
}

std::shared_ptr<completion<std::optional<message>>> channel_get(runtime& rt, std::uint64_t channel,
                                                                std::optional<std::chrono::milliseconds> timeout) {
  auto c = std::make_shared<completion<std::optional<message>>>();
  rt.get(channel, timeout, [c](std::error_code ec, multipart parts, bool) {
    if (ec == errc::timeout) return c->set_value(std::nullopt);
    if (ec) return c->set_error(std::make_exception_ptr(error(ec, "receiving from a queue or pipe failed: " + ec.message())));
    c->set_value(message(message::frames::whole(std::move(parts))));
  });
  return c;
}

}  // namespace fiber::detail
