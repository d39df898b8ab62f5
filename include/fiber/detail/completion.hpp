// A value that fiber's loop will produce later, awaited or waited for by blocking.
#pragma once
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <variant>

#include "fiber/detail/unique_function.hpp"
#include "fiber/op.hpp"

namespace fiber::detail {

/// Touched only on fiber's loop thread.
template <class T>
struct completion {
  std::optional<T> value;
  std::exception_ptr error;
  bool done = false;
  unique_function<void()> waiter;

  void set_value(T v) {
    if (done) return;
    value.emplace(std::move(v));
    finish();
  }
  void set_error(std::exception_ptr e) {
    if (done) return;
    error = std::move(e);
    finish();
  }

 private:
  void finish() {
    done = true;
    if (auto w = std::move(waiter)) {
      waiter = nullptr;
      w();
    }
  }
};

template <class T>
T take(completion<T>& c) {
  if (c.error) std::rethrow_exception(c.error);
  return std::move(*c.value);
}

/// Awaits `c` (the coroutine runs on fiber's executor, see op).
template <class T>
asio::awaitable<T> await_completion(std::shared_ptr<completion<T>> c) {
  if (!c->done) {
    // g++ 12 miscompiles a closure that captures a shared_ptr when use_awaitable's initiation
    // (a coroutine) takes it by value: the copy skips the reference count. So `c` goes as an
    // argument of the initiation, not as a capture.
    co_await asio::async_initiate<decltype(asio::use_awaitable), void()>(
        [](auto handler, const std::shared_ptr<completion<T>>& c) {
          auto ex = asio::get_associated_executor(handler);
          c->waiter = [h = std::move(handler), ex]() mutable { asio::post(ex, std::move(h)); };
        },
        asio::use_awaitable, c);
  }
  T v = take(*c);
  co_return v;
}

/// Blocks until `c` is done, running fiber's loop on this thread when it can.
template <class T>
T block_on_completion(runtime& rt, const std::shared_ptr<completion<T>>& c) {
  auto flag = std::make_shared<std::atomic<bool>>(false);
  wait_until_started(rt, [c, flag, &rt] {
    if (c->done)
      notify_done(rt, *flag);
    else
      c->waiter = [flag, &rt] { notify_done(rt, *flag); };
  }, *flag);
  return take(*c);
}

/// The one way fiber makes an op out of work that completes a completion: `start` runs on
/// fiber's loop when the op is first awaited or waited for, and returns the completion (for
/// op<void>, a completion<std::monostate>). Awaited, the coroutine runs it on the loop; waited
/// for, the calling thread runs it while it holds the loop (no extra hop).
template <class T, class Start>
op<T> deferred_op(std::shared_ptr<runtime> rt, Start start) {
  using V = std::conditional_t<std::is_void_v<T>, std::monostate, T>;
  struct body {
    static asio::awaitable<T> run(Start start) {
      std::shared_ptr<completion<V>> c = start();  // the coroutine runs on fiber's loop (see op)
      if constexpr (std::is_void_v<T>)
        (void)co_await await_completion(std::move(c));
      else
        co_return co_await await_completion(std::move(c));
    }
  };
  auto direct = [rt, start]() -> T {
    std::shared_ptr<completion<V>> c;
    auto flag = std::make_shared<std::atomic<bool>>(false);
    auto* r = rt.get();
    wait_until_started(*r, [&] {
      c = start();
      if (c->done)
        notify_done(*r, *flag);
      else
        c->waiter = [flag, r] { notify_done(*r, *flag); };
    }, *flag);
    if constexpr (std::is_void_v<T>)
      (void)take(*c);
    else
      return take(*c);
  };
  return {rt, body::run(std::move(start)), std::move(direct)};
}

/// An op for work already under way.
template <class T>
op<T> completion_op(const std::shared_ptr<runtime>& rt, std::shared_ptr<completion<T>> c) {
  return deferred_op<T>(rt, [c] { return c; });
}
inline op<void> completion_op(const std::shared_ptr<runtime>& rt, std::shared_ptr<completion<std::monostate>> c) {
  return deferred_op<void>(rt, [c] { return c; });
}

}  // namespace fiber::detail
