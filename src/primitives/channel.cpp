// Queue and pipe operations: awaitable wrappers over the runtime's broker.
#include <asio/experimental/as_tuple.hpp>
#include <asio/dispatch.hpp>
#include <asio/post.hpp>

#include "fiber/detail/channel.hpp"
#include "fiber/op.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {

asio::any_io_executor executor_of(runtime& rt) noexcept { return rt.executor(); }
bool in_loop_thread(runtime& rt) noexcept { return rt.in_loop_thread(); }
void wait_until(runtime& rt, const std::atomic<bool>& done) { rt.wait_until(done); }
void notify_done(runtime& rt, std::atomic<bool>& done) noexcept { rt.notify_done(done); }
void wait_until_started(runtime& rt, unique_function<void()> start, const std::atomic<bool>& done) {
  rt.drive(std::move(start), done);
}

std::uint64_t new_channel_id(runtime& rt) { return rt.new_channel_id(); }

void channel_release(runtime& rt, std::uint64_t channel) noexcept {
  if (rt.in_loop_thread()) {
    rt.release(channel);
    return;
  }
  asio::post(rt.io(), [weak = rt.weak_from_this(), channel] {
    if (auto self = weak.lock()) self->release(channel);
  });
}

asio::awaitable<void> channel_put(std::shared_ptr<runtime> rt, std::uint64_t channel, std::shared_ptr<writer> w) {
  rt->put(channel, *w);
  co_return;
}

void channel_put_blocking(runtime& rt, std::uint64_t channel, writer& w) {
  const std::atomic<bool> nothing_to_wait_for{true};
  rt.drive([&] { rt.put(channel, w); }, nothing_to_wait_for);
}

namespace {
template <class Token>
auto async_get(runtime& rt, std::uint64_t channel, std::optional<std::chrono::milliseconds> timeout, Token&& token) {
  return asio::async_initiate<Token, void(std::error_code, multipart)>(
      [&rt, channel, timeout](auto handler) {
        auto ex = asio::get_associated_executor(handler, rt.executor());
        rt.get(channel, timeout, [h = std::move(handler), ex](std::error_code ec, multipart parts, bool may_run_inline) mutable {
          auto f = [h = std::move(h), ec, parts = std::move(parts)]() mutable { h(ec, std::move(parts)); };
          if (may_run_inline)
            asio::dispatch(ex, std::move(f));
          else
            asio::post(ex, std::move(f));
        });
      },
      token);
}
}  // namespace

namespace {
std::optional<message> to_message(std::error_code ec, multipart&& parts) {
  if (ec == errc::timeout) return std::nullopt;
  if (ec) throw error(ec, "receiving from a queue or pipe failed: " + ec.message());
  return message(message::frames::whole(std::move(parts)));
}
}  // namespace

asio::awaitable<std::optional<message>> channel_get(std::shared_ptr<runtime> rt, std::uint64_t channel,
                                                    std::optional<std::chrono::milliseconds> timeout) {
  auto [ec, parts] = co_await async_get(*rt, channel, timeout, asio::experimental::as_tuple(asio::use_awaitable));
  co_return to_message(ec, std::move(parts));
}

std::optional<message> channel_get_blocking(runtime& rt, std::uint64_t channel,
                                            std::optional<std::chrono::milliseconds> timeout) {
  struct outcome {
    std::atomic<bool> done{false};
    std::error_code ec;
    multipart parts;
  };
  // Shared with the handler: it must stay valid even if this thread leaves by an exception.
  auto result = std::make_shared<outcome>();
  rt.drive(
      [&rt, channel, timeout, result] {
        rt.get(channel, timeout, [&rt, result](std::error_code ec, multipart parts, bool) {
          result->ec = ec;
          result->parts = std::move(parts);
          rt.notify_done(result->done);
        });
      },
      result->done);
  return to_message(result->ec, std::move(result->parts));
}

}  // namespace fiber::detail
