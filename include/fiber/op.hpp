/// @file
/// What fiber's operations return: awaitable, or `.get()` to block.
///
///   co_await p.start();     // inside an asio::awaitable coroutine
///   p.start().get();        // plain program: blocks the calling thread
#pragma once
#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/use_awaitable.hpp>
#include <atomic>
#include <exception>
#include <memory>
#include <optional>

#include "fiber/detail/unique_function.hpp"
#include "fiber/error.hpp"
#include "fiber/detail/export.hpp"

namespace fiber {
namespace detail {
class runtime;
FIBER_API asio::any_io_executor executor_of(runtime&) noexcept;
FIBER_API bool in_loop_thread(runtime&) noexcept;
[[noreturn]] FIBER_API void throw_would_deadlock();
/// Blocks the calling thread until `done` is set: waits while the loop runs elsewhere, or, in a
/// worker, runs the loop itself (no thread hop between the caller and the loop).
FIBER_API void wait_until(runtime&, const std::atomic<bool>& done);
/// Sets `done` and wakes the threads in wait_until.
FIBER_API void notify_done(runtime&, std::atomic<bool>& done) noexcept;
/// Runs `start` on fiber's loop (on this thread when it can take the loop), then waits as
/// wait_until does.
FIBER_API void wait_until_started(runtime&, unique_function<void()> start, const std::atomic<bool>& done);

/// Whether a lazy operation ever started, and what made it (the facade's function, from
/// std::source_location): an op destroyed before it started is reported, naming that.
struct op_watch {
  std::atomic<bool> started{false};
  const char* made_by = "";
};
/// Logs (warn) that the operation `made_by` made was dropped before it was awaited or waited for.
FIBER_API void report_dropped_op(const char* made_by) noexcept;

/// What a call fiber refuses at compile time returns (a lambda passed where a registered
/// function must go, FIBER_DETAIL_REFUSE_CALLABLE): whatever the caller does with it (get(),
/// co_await, assign the result) compiles, so fiber's static_assert is the only error the
/// compiler prints, not "invalid use of void" before it. Never defined: it never links.
struct refused_value {
  template <class T>
  operator T() const;
};
struct refused_call : asio::awaitable<refused_value> {
  refused_value get() const;
  void cancel() const;
};

template <class T>
struct blocking_result {
  std::optional<T> value;
  std::exception_ptr error;
  std::atomic<bool> done{false};
};
template <>
struct blocking_result<void> {
  std::exception_ptr error;
  std::atomic<bool> done{false};
};

/// Runs `a` on `ex`, resuming the caller on its own executor when they differ.
template <class T>
asio::awaitable<T> on_executor(asio::any_io_executor ex, asio::awaitable<T> a) {
  auto mine = co_await asio::this_coro::executor;
  if (mine == ex) co_return co_await std::move(a);
  co_return co_await asio::co_spawn(ex, std::move(a), asio::use_awaitable);
}
template <>
inline asio::awaitable<void> on_executor(asio::any_io_executor ex, asio::awaitable<void> a) {
  auto mine = co_await asio::this_coro::executor;
  if (mine == ex)
    co_await std::move(a);
  else
    co_await asio::co_spawn(ex, std::move(a), asio::use_awaitable);
}
}  // namespace detail

/// An operation of fiber: `co_await` it in a coroutine, or call `get()` to wait for it.
template <class T>
class [[nodiscard]] op : public asio::awaitable<T> {
 public:
  /// `direct`, when given, is what get() runs instead of the coroutine: the same operation
  /// done on the calling thread, which takes fiber's loop while it waits.
  /// `watch`, when given, says whether the operation started: one dropped unstarted is reported.
  op(std::shared_ptr<detail::runtime> rt, asio::awaitable<T> body, detail::unique_function<T()> direct = nullptr,
     std::shared_ptr<detail::op_watch> watch = nullptr)
      : asio::awaitable<T>(detail::on_executor(detail::executor_of(*rt), std::move(body))),
        rt_(std::move(rt)),
        direct_(std::move(direct)),
        watch_(std::move(watch)) {}
  /// Moves the operation; the moved-from op holds none.
  op(op&&) noexcept = default;
  /// Moves the operation; the moved-from op holds none.
  op& operator=(op&&) noexcept = default;
  /// A lazy operation that never started never happens: `q.put(x);` without co_await or get()
  /// sends nothing. That is said in the log, naming the operation, rather than lost in silence.
  ~op() {
    if (watch_ && this->valid() && !watch_->started.load(std::memory_order_relaxed)) detail::report_dropped_op(watch_->made_by);
  }

  /// Asks work already under way to stop (from any thread): a pool's map_async, starmap_async
  /// and apply_async drop their queued items and stop their running ones, and the op completes
  /// with errc::cancelled. Work that cannot be stopped, or has finished, ignores it. A co_await
  /// is cancelled the Asio way instead (a bound cancellation slot, or an awaitable operator).
  void cancel() {
    if (canceller_) canceller_();
  }
  /// fiber's: what cancel() does for this op.
  void set_canceller(detail::unique_function<void()> f) { canceller_ = std::move(f); }

  /// get() takes the op (it runs once): on a named op, `std::move(h).get()`, and `co_await
  /// std::move(h)`. This overload is there for its words only; without it the compiler said
  /// "discards qualifiers".
  template <class U = T>
  U get() & {
    static_assert(!std::is_same_v<U, U>,
                  "fiber::op<T>::get() on a named op: write std::move(h).get() (and co_await std::move(h)): "
                  "an op runs once, and get() or co_await takes it");
    return std::move(*this).get();
  }

  /// Blocks until the operation completes; throws what `co_await` would throw.
  T get() && {
    if (watch_) watch_->started = true;  // asked for: whatever happens next, the caller hears of it
    if (detail::in_loop_thread(*rt_)) detail::throw_would_deadlock();
    if (direct_) return direct_();
    detail::blocking_result<T> r;
    auto* rt = rt_.get();
    auto ex = detail::executor_of(*rt);
    if constexpr (std::is_void_v<T>) {
      asio::co_spawn(ex, std::move(static_cast<asio::awaitable<T>&>(*this)), [&r, rt](const std::exception_ptr& e) {
        r.error = e;
        detail::notify_done(*rt, r.done);
      });
      detail::wait_until(*rt, r.done);
      if (r.error) std::rethrow_exception(r.error);
    } else {
      asio::co_spawn(ex, std::move(static_cast<asio::awaitable<T>&>(*this)), [&r, rt](const std::exception_ptr& e, T v) {
        if (e)
          r.error = e;
        else
          r.value.emplace(std::move(v));
        detail::notify_done(*rt, r.done);
      });
      detail::wait_until(*rt, r.done);
      if (r.error) std::rethrow_exception(r.error);
      return std::move(r.value).value();
    }
  }

 private:
  std::shared_ptr<detail::runtime> rt_;
  detail::unique_function<T()> direct_;
  std::shared_ptr<detail::op_watch> watch_;
  detail::unique_function<void()> canceller_;
};

}  // namespace fiber
