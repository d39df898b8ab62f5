// A value that fiber's loop will produce later, awaited or waited for by blocking.
#pragma once
#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <exception>
#include <memory>
#include <optional>
#include <source_location>
#include <type_traits>
#include <variant>

#include "fiber/detail/unique_function.hpp"
#include "fiber/op.hpp"

namespace fiber::detail {

/// Touched only on fiber's loop thread.
template <class T>
struct completion {
  using value_type = T;
  std::optional<T> value;
  std::exception_ptr error;
  bool done = false;
  unique_function<void()> waiter;
  /// Set by work that can be stopped (a pool's call): stops it, and the work then completes
  /// this with errc::cancelled. Run at most once; dropped once done (it may refer back to what
  /// refers to this).
  unique_function<void()> on_cancel;

  void cancel() {
    if (done || !on_cancel) return;
    auto f = std::move(on_cancel);
    on_cancel = nullptr;
    f();
  }

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
    on_cancel = nullptr;
    if (auto w = std::move(waiter)) {
      waiter = nullptr;
      w();
    }
  }
};

template <class T>
T take(completion<T>& c) {
  if (c.error) std::rethrow_exception(c.error);
  return std::move(c.value).value();
}

/// Waits until `c` is done (the coroutine runs on fiber's executor, see op).
template <class T>
asio::awaitable<void> until_done(std::shared_ptr<completion<T>> c) {
  if (!c->done) {
    // g++ 12 miscompiles a closure that captures a shared_ptr when use_awaitable's initiation
    // (a coroutine) takes it by value: the copy skips the reference count. So `c` goes as an
    // argument of the initiation, not as a capture.
    co_await asio::async_initiate<decltype(asio::use_awaitable), void()>(
        [](auto handler, const std::shared_ptr<completion<T>>& work) {
          auto ex = asio::get_associated_executor(handler);
          // Asio's cancellation (a cancellation slot bound to the co_await, or an awaitable
          // operator's `||`) stops the work behind `c` where it can be stopped; `c` completes
          // with the work's errc::cancelled. The signal may come from any thread: the
          // completion is touched only on fiber's loop, this coroutine's executor.
          if (auto slot = asio::get_associated_cancellation_slot(handler); slot.is_connected())
            slot.assign([work, ex](asio::cancellation_type) { asio::post(ex, [work] { work->cancel(); }); });
          work->waiter = [h = std::move(handler), ex]() mutable { asio::post(ex, std::move(h)); };
        },
        asio::use_awaitable, c);
  }
}

/// What deferred_op does with the completion's value when given no finishing step.
struct as_is {
  template <class V>
  V operator()(V&& v) const {
    return std::forward<V>(v);
  }
};

/// The one way fiber makes an op: `start` runs on fiber's loop when the op is first awaited or
/// waited for and returns a completion (a std::shared_ptr<completion<V>>); `finish` turns its
/// value into the op's T (decoding a reply, making a proxy) on the side that waits: in the
/// coroutine when awaited, on the calling thread when waited for. Awaited, the coroutine runs
/// `start` on the loop; waited for, the calling thread runs it while it holds the loop (no extra
/// hop). What `start` throws is the op's error. For op<void>, `finish` may return nothing.
template <class T, class Start, class Finish = as_is>
op<T> deferred_op(std::shared_ptr<runtime> rt, Start start, Finish finish = {},
                  std::source_location made_by = std::source_location::current()) {
  using C = typename std::invoke_result_t<Start&>::element_type;
  using V = typename C::value_type;
  static_assert(std::is_void_v<T> || std::is_invocable_r_v<T, Finish&, V&&>, "deferred_op: finish must make a T from the completion's value");
  struct parts {
    static std::shared_ptr<C> started(Start& start) noexcept {
      try {
        return start();
      } catch (...) {
        auto failed = std::make_shared<C>();
        failed->set_error(std::current_exception());
        return failed;
      }
    }
    static T finished(Finish& finish, C& c) {
      if constexpr (std::is_void_v<T>) {
        if constexpr (std::is_same_v<Finish, as_is>)
          (void)take(c);
        else
          (void)finish(take(c));
      } else {
        return finish(take(c));
      }
    }
    // `keep` holds the runtime for a coroutine that may outlive its op (co_spawn'd from it).
    static asio::awaitable<T> run(Start start, Finish finish, std::shared_ptr<op_watch> watch,
                                  std::shared_ptr<runtime> keep) {
      (void)keep;
      if (watch) watch->started = true;
      auto c = started(start);  // the coroutine runs on fiber's loop (see op)
      co_await until_done(c);
      co_return finished(finish, *c);
    }
  };
  // Work already under way (completion_op) is not watched: dropping its op loses nothing.
  std::shared_ptr<op_watch> watch;
  if (made_by.line() != 0) {
    watch = std::make_shared<op_watch>();
    watch->made_by = made_by.function_name();
  }
  // The op holds the runtime and the watch while get() runs this: plain pointers to them here,
  // so that an op costs one atomic count of the runtime's, not five.
  auto direct = [r = rt.get(), start, finish, w = watch.get()]() mutable -> T {
    if (w) w->started = true;
    std::shared_ptr<C> c;
    auto flag = std::make_shared<std::atomic<bool>>(false);
    wait_until_started(*r, [&] {
      c = parts::started(start);
      if (c->done)
        notify_done(*r, *flag);
      else
        c->waiter = [flag, r] { notify_done(*r, *flag); };
    }, *flag);
    return parts::finished(finish, *c);
  };
  auto body = parts::run(std::move(start), std::move(finish), watch, rt);
  return {std::move(rt), std::move(body), std::move(direct), std::move(watch)};
}

/// What callback_op hands its `arm`: done() completes the op, done(e) fails it with `e` (a null
/// `e` completes it). Copyable; the first call wins.
class done_callback {
 public:
  explicit done_callback(std::shared_ptr<completion<std::monostate>> c) : c_(std::move(c)) {}
  void operator()() const { c_->set_value({}); }
  void operator()(std::exception_ptr e) const {
    if (e)
      c_->set_error(std::move(e));
    else
      c_->set_value({});
  }

 private:
  std::shared_ptr<completion<std::monostate>> c_;
};

/// The one way a facade makes an op that completes when its core calls back: `arm(done)` runs
/// on fiber's loop when the op starts (as deferred_op's start) and hands `done` (a
/// done_callback) to the core. What `arm` throws is the op's error.
template <class Arm>
op<void> callback_op(std::shared_ptr<runtime> rt, Arm arm, std::source_location made_by = std::source_location::current()) {
  static_assert(std::is_invocable_v<Arm&, done_callback>, "callback_op: arm must take the done_callback");
  return deferred_op<void>(
      std::move(rt),
      [arm = std::move(arm)]() mutable {
        auto c = std::make_shared<completion<std::monostate>>();
        arm(done_callback(c));
        return c;
      },
      as_is{}, made_by);
}

/// An op for work already under way.
/// Work already under way: not watched (an empty source_location), since dropping its op loses nothing.
/// Its cancel() stops the work where the work can be stopped (completion::on_cancel).
template <class T>
op<T> completion_op(const std::shared_ptr<runtime>& rt, const std::shared_ptr<completion<T>>& c) {
  auto o = deferred_op<T>(rt, [c] { return c; }, as_is{}, std::source_location());
  o.set_canceller([ex = executor_of(*rt), c] { asio::post(ex, [c] { c->cancel(); }); });
  return o;
}
inline op<void> completion_op(const std::shared_ptr<runtime>& rt, const std::shared_ptr<completion<std::monostate>>& c) {
  auto o = deferred_op<void>(rt, [c] { return c; }, as_is{}, std::source_location());
  o.set_canceller([ex = executor_of(*rt), c] { asio::post(ex, [c] { c->cancel(); }); });
  return o;
}

}  // namespace fiber::detail
