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

template <class T>
op<T> completion_op(const std::shared_ptr<runtime>& rt, std::shared_ptr<completion<T>> c) {
  return {rt, await_completion(c), [rt, c] { return block_on_completion(*rt, c); }};
}

}  // namespace fiber::detail
