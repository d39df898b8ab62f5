// fiber/pool.hpp - a pool of worker processes: map, imap, starmap, apply, and their async forms.
//
//   int square(int x) { return x * x; }   FIBER_REMOTE(square);
//   fiber::pool pool(4);
//   std::vector<int> ys = pool.map(&square, xs).get();      // or: co_await pool.map(&square, xs)
//
// Workers pull chunks of tasks (a small credit each), so no worker gets more than it asked for.
// A task that throws fails alone with fiber::remote_error; a worker that dies has its tasks run
// again elsewhere and is replaced; a task that has taken down max_attempts workers fails alone
// with errc::worker_lost.
//
// Needs (fiber/meta.hpp): workers start with pool_options::needs. Work for a function whose
// FIBER_META asks for more raises the pool's needs: workers started with less finish what they
// hold and are replaced by workers started with the joined needs, and that function's tasks only
// ever run on workers that cover its needs.
#pragma once
#include <cstddef>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "fiber/context.hpp"
#include "fiber/detail/completion.hpp"
#include "fiber/detail/pool_core.hpp"
#include "fiber/detail/pool_sinks.hpp"
#include "fiber/op.hpp"
#include "fiber/pool_options.hpp"
#include "fiber/registry.hpp"

namespace fiber {
namespace detail {
/// What cancelling `c` (a pool call's completion) does: stops `sink`'s call. Weak, since the
/// sink holds the completion. On fiber's loop thread.
template <class C>
void cancel_through(C& c, const std::shared_ptr<pool_core>& core, const std::shared_ptr<pool_sink>& sink) {
  c.on_cancel = [core = std::weak_ptr<pool_core>(core), sink = std::weak_ptr<pool_sink>(sink)] {
    auto k = core.lock();
    auto s = sink.lock();
    if (k && s) k->cancel(*s);
  };
}
}  // namespace detail

/// Results of imap/imap_unordered, one at a time: `next()` gives nullopt after the last one.
/// A task that raised makes next() throw its remote_error at that position.
template <class R>
class result_stream {
 public:
  result_stream(std::shared_ptr<detail::pool_core> core, std::shared_ptr<detail::stream_source<R>> source,
                std::shared_ptr<detail::pool_sink> sink)
      : core_(std::move(core)), source_(std::move(source)), sink_(std::move(sink)) {}

  /// The next result; a cancelled co_await of it cancels the whole stream.
  op<std::optional<R>> next() {
    return detail::deferred_op<std::optional<R>>(core_->rt(), [core = core_, source = source_, sink = sink_] {
      auto c = std::make_shared<detail::completion<std::optional<R>>>();
      detail::cancel_through(*c, core, sink);
      poll(c, source, core);
      return c;
    });
  }

  /// Stops the stream's work (from any thread): items not yet run are dropped, running ones
  /// stopped (their workers killed and replaced); next() then throws errc::cancelled for each
  /// result not delivered before.
  void cancel() {
    asio::post(detail::executor_of(*core_->rt()), [core = core_, sink = sink_] { core->cancel(*sink); });
  }

  /// Blocking iteration for plain programs: `for (auto& y : pool.imap(&f, xs)) ...`.
  /// A task's error is thrown by the increment (or begin()) that reaches it.
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = R;
    using difference_type = std::ptrdiff_t;
    using pointer = R*;
    using reference = R&;
    iterator() = default;
    explicit iterator(result_stream* s) : stream_(s) { advance(); }
    R& operator*() { return *current_; }
    R* operator->() { return &*current_; }
    iterator& operator++() {
      advance();
      return *this;
    }
    void operator++(int) { advance(); }
    friend bool operator==(const iterator& a, const iterator& b) { return a.stream_ == b.stream_; }

   private:
    void advance() {
      current_ = stream_->next().get();
      if (!current_) stream_ = nullptr;  // the end
    }
    result_stream* stream_ = nullptr;
    std::optional<R> current_;
  };
  iterator begin() { return iterator(this); }
  iterator end() { return iterator(); }

 private:
  static void poll(std::shared_ptr<detail::completion<std::optional<R>>> c,
                   std::shared_ptr<detail::stream_source<R>> source, std::shared_ptr<detail::pool_core> core) {
    std::optional<R> value;
    std::exception_ptr error;
    bool have = false;
    try {
      have = source->try_next(value, error);
    } catch (...) {
      error = std::current_exception();
      have = true;
    }
    if (!have) {
      source->set_waiter([c, source, core] { poll(c, source, core); });
      return;
    }
    core->pump();  // room for more results now
    if (error)
      c->set_error(error);
    else
      c->set_value(std::move(value));
  }

  std::shared_ptr<detail::pool_core> core_;
  std::shared_ptr<detail::stream_source<R>> source_;
  std::shared_ptr<detail::pool_sink> sink_;
};

class pool {
 public:
  /// cpu_count() workers. Workers start now; `ready()` completes when all have.
  pool() : pool(context::default_context(), pool_options{}) {}
  /// `processes` workers (at least 1).
  explicit pool(int processes) : pool(context::default_context(), with_processes(processes)) {}
  explicit pool(pool_options options) : pool(context::default_context(), std::move(options)) {}
  pool(context& ctx, pool_options options);
  pool(context& ctx, int processes) : pool(ctx, with_processes(processes)) {}
  pool(pool&&) noexcept = default;
  /// Terminates the workers (like multiprocessing's Pool.__exit__); join() first to let them finish.
  /// A view made by with() does not.
  ~pool();

  /// A view on the same workers whose calls use `options`, e.g. for a function that must not
  /// run twice: `pool.with({.retry = false}).apply(&charge_card, order)`.
  pool with(call_options options) const {
    pool view(rt_, core_);
    view.call_options_ = options;
    return view;
  }

  /// f(x) for every x of `xs`, results in input order. `xs` must outlive the operation.
  template <class R, class A, class Range>
  op<std::vector<detail::result_t<R>>> map(R (*f)(A), const Range& xs, std::size_t chunksize = 0) {
    return run_map<detail::result_t<R>>(f, std::begin(xs), std::end(xs), detail::size_hint(xs), chunksize,
                                        encode_one<A>());
  }
  /// f(args...) for every tuple of arguments in `tuples`.
  template <class R, class... P, class Range>
  op<std::vector<detail::result_t<R>>> starmap(R (*f)(P...), const Range& tuples, std::size_t chunksize = 0) {
    return run_map<detail::result_t<R>>(f, std::begin(tuples), std::end(tuples), detail::size_hint(tuples), chunksize,
                                        [](writer& w, const auto& t) {
                                          std::apply([&](const auto&... a) { (encode_as<std::decay_t<P>>(w, a), ...); }, t);
                                        });
  }
  /// f(args...) in a worker.
  template <class R, class... P, class... A>
  op<detail::result_t<R>> apply(R (*f)(P...), A&&... args) {
    return detail::deferred_op<detail::result_t<R>>(rt_, apply_starter<R, P...>(f, std::forward<A>(args)...));
  }

  /// As map, but already submitted: the returned op may be awaited or waited for any time later.
  /// `xs` is copied.
  template <class R, class A, class Range>
  op<std::vector<detail::result_t<R>>> map_async(R (*f)(A), const Range& xs, std::size_t chunksize = 0) {
    auto copy = std::make_shared<std::vector<std::decay_t<A>>>(std::begin(xs), std::end(xs));
    auto c = submit_map<detail::result_t<R>>(f, copy->begin(), copy->end(), copy->size(), chunksize,
                                             [copy, encode = encode_one<A>()](writer& w, const auto& x) { encode(w, x); });
    return detail::completion_op(rt_, c);
  }
  template <class R, class... P, class Range>
  op<std::vector<detail::result_t<R>>> starmap_async(R (*f)(P...), const Range& tuples, std::size_t chunksize = 0) {
    using args_t = std::tuple<std::decay_t<P>...>;
    auto copy = std::make_shared<std::vector<args_t>>();
    for (const auto& t : tuples)
      copy->push_back(std::apply([](const auto&... a) { return args_t(a...); }, t));
    auto c = submit_map<detail::result_t<R>>(f, copy->begin(), copy->end(), copy->size(), chunksize,
                                             [copy](writer& w, const auto& t) { w.value(t); });
    return detail::completion_op(rt_, c);
  }
  template <class R, class... P, class... A>
  op<detail::result_t<R>> apply_async(R (*f)(P...), A&&... args) {
    auto start = apply_starter<R, P...>(f, std::forward<A>(args)...);
    std::shared_ptr<detail::completion<detail::result_t<R>>> c;
    core_->on_loop([&](detail::pool_core&) { c = start(); });
    return detail::completion_op(rt_, c);
  }

  /// Results in input order as they become available; `xs` must outlive the stream. At most a
  /// bounded number of results wait for the caller, so a 10-million-item imap stays small.
  template <class R, class A, class Range>
  result_stream<detail::result_t<R>> imap(R (*f)(A), const Range& xs, std::size_t chunksize = 1) {
    return run_stream<detail::result_t<R>>(f, std::begin(xs), std::end(xs), chunksize, encode_one<A>(), true);
  }
  /// Results in the order they arrive.
  template <class R, class A, class Range>
  result_stream<detail::result_t<R>> imap_unordered(R (*f)(A), const Range& xs, std::size_t chunksize = 1) {
    return run_stream<detail::result_t<R>>(f, std::begin(xs), std::end(xs), chunksize, encode_one<A>(), false);
  }

  /// A lambda or other callable where a pool needs a registered function: fiber's words at
  /// compile time instead of a deduction failure (each entry point above has one).
  FIBER_DETAIL_REFUSE_CALLABLE(map)
  FIBER_DETAIL_REFUSE_CALLABLE(starmap)
  FIBER_DETAIL_REFUSE_CALLABLE(apply)
  FIBER_DETAIL_REFUSE_CALLABLE(map_async)
  FIBER_DETAIL_REFUSE_CALLABLE(starmap_async)
  FIBER_DETAIL_REFUSE_CALLABLE(apply_async)
  FIBER_DETAIL_REFUSE_CALLABLE(imap)
  FIBER_DETAIL_REFUSE_CALLABLE(imap_unordered)

  /// No more work may be submitted; workers leave once the submitted work is done.
  void close();
  /// After close(): completes when every worker has left.
  op<void> join();
  /// Kills the workers now; work not finished fails with errc::closed.
  op<void> terminate();
  /// Grows or shrinks the pool while it works; no task is lost.
  void resize(int processes);
  /// Completes when every worker of the pool has started.
  op<void> ready();
  pool_stats stats() const;

 private:
  static pool_options with_processes(int processes) {
    pool_options o;
    o.processes = processes;
    return o;
  }
  /// Encodes one item as the argument tuple of a one-parameter function.
  template <class A>
  static auto encode_one() {
    return [](writer& w, const auto& x) { encode_as<std::decay_t<A>>(w, x); };
  }
  /// One argument, as the parameter type T reads it (the wire of a tuple of arguments is its
  /// elements, one after the other). A T, or a reference_wrapper to one, is written as it is:
  /// nothing is copied, and an object that several items hold by reference is seen as one (its
  /// large data travels once per chunk: writer::share_ranges). Anything else is converted.
  template <class T, class U>
  static void encode_as(writer& w, const U& u) {
    if constexpr (std::is_same_v<U, T>)
      w.value(u);
    else if constexpr (std::is_same_v<U, std::reference_wrapper<T>> || std::is_same_v<U, std::reference_wrapper<const T>>)
      w.value(u.get());
    else
      w.value(static_cast<T>(u));
  }

  template <class R, class... P, class... A>
  auto apply_starter(R (*f)(P...), A&&... args) {
    static_assert(sizeof...(P) == sizeof...(A), "fiber::pool::apply: wrong number of arguments for the function");
    core_->check_open();
    using T = detail::result_t<R>;
    using args_t = std::tuple<std::decay_t<P>...>;
    auto id = detail::require_registered(f).id;
    // Shared, so that the start stays copyable (an op keeps one per way of waiting) while
    // move-only arguments are moved, once, into the call that runs.
    auto held = std::make_shared<args_t>(std::forward<A>(args)...);
    return [core = core_, id, held, opts = call_options_]() {
      auto c = std::make_shared<detail::completion<T>>();
      auto sink = std::make_shared<detail::single_sink<T, args_t>>(std::move(*held), c);
      detail::cancel_through(*c, core, sink);
      core->submit(id, 1, 1, sink, opts);
      return c;
    };
  }

  template <class T, class F, class It, class Encode>
  std::shared_ptr<detail::completion<std::vector<T>>> submit_map(F f, It first, It last, std::size_t hint,
                                                                 std::size_t chunksize, Encode encode) {
    core_->check_open();
    auto id = detail::require_registered(f).id;
    auto c = std::make_shared<detail::completion<std::vector<T>>>();
    auto sink = std::make_shared<detail::map_sink<T, It, Encode>>(first, last, std::move(encode), c);
    core_->on_loop([id, chunksize, hint, sink, c, core_ptr = core_, opts = call_options_](detail::pool_core& core) {
      detail::cancel_through(*c, core_ptr, sink);
      core.submit(id, chunksize, hint, sink, opts);
    });
    return c;
  }

  template <class T, class F, class It, class Encode>
  op<std::vector<T>> run_map(F f, It first, It last, std::size_t hint, std::size_t chunksize, Encode encode) {
    core_->check_open();
    auto id = detail::require_registered(f).id;
    return detail::deferred_op<std::vector<T>>(rt_, [core = core_, id, first, last, hint, chunksize, encode,
                                                   opts = call_options_]() {
      auto c = std::make_shared<detail::completion<std::vector<T>>>();
      auto sink = std::make_shared<detail::map_sink<T, It, Encode>>(first, last, encode, c);
      detail::cancel_through(*c, core, sink);
      core->submit(id, chunksize, hint, sink, opts);
      return c;
    });
  }

  template <class T, class F, class It, class Encode>
  result_stream<T> run_stream(F f, It first, It last, std::size_t chunksize, Encode encode, bool ordered) {
    core_->check_open();
    auto id = detail::require_registered(f).id;
    auto sink = std::make_shared<detail::stream_sink<T, It, Encode>>(first, last, std::move(encode), ordered,
                                                                     stream_bound(chunksize));
    core_->on_loop([id, chunksize, sink, opts = call_options_](detail::pool_core& core) {
      core.submit(id, chunksize, 0, sink, opts);
    });
    return result_stream<T>(core_, sink, sink);
  }
  std::size_t stream_bound(std::size_t chunksize) const;

  pool(std::shared_ptr<detail::runtime> rt, std::shared_ptr<detail::pool_core> core)
      : rt_(std::move(rt)), core_(std::move(core)), owner_(false) {}

  std::shared_ptr<detail::runtime> rt_;
  std::shared_ptr<detail::pool_core> core_;
  call_options call_options_;
  bool owner_ = true;
};

}  // namespace fiber
