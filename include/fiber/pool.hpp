/// @file
/// A pool of worker processes: map, imap, starmap, apply, and their async forms.
///
///   int square(int x) { return x * x; }   FIBER_REMOTE(square);
///   fiber::pool pool(4);
///   std::vector<int> ys = pool.map(&square, xs).get();      // or: co_await pool.map(&square, xs)
///
/// Workers pull chunks of tasks (a small credit each), so no worker gets more than it asked for.
/// A task that throws fails alone with fiber::remote_error; a worker that dies has its tasks run
/// again elsewhere and is replaced; a task that has taken down max_attempts workers fails alone
/// with errc::worker_lost.
///
/// Needs (fiber/meta.hpp): workers start with pool_options::needs. Work for a function whose
/// FIBER_META asks for more raises the pool's needs: workers started with less finish what they
/// hold and are replaced by workers started with the joined needs, and that function's tasks only
/// ever run on workers that cover its needs.
#pragma once
#include <atomic>
#include <cstddef>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "fiber/context.hpp"
#include "fiber/detail/completion.hpp"
#include "fiber/detail/pool_core.hpp"
#include "fiber/detail/pool_sinks.hpp"
#include "fiber/detail/pool_starter.hpp"
#include "fiber/op.hpp"
#include "fiber/pool_options.hpp"
#include "fiber/registry.hpp"
#include "fiber/detail/export.hpp"

namespace fiber {

/// Results of imap/imap_unordered, one at a time: `next()` gives nullopt after the last one.
/// A task that raised makes next() throw its remote_error at that position.
template <class R>
class result_stream {
 public:
  /// @cond internal
  result_stream(std::shared_ptr<detail::pool_core> core, std::shared_ptr<detail::stream_source<R>> source,
                std::shared_ptr<detail::pool_sink> sink)
      : core_(std::move(core)), source_(std::move(source)), sink_(std::move(sink)) {}
  /// @endcond

  /// The next result; a cancelled co_await of it cancels the whole stream.
  op<std::optional<R>> next() {
    return detail::deferred_op<std::optional<R>>(core_->rt(), [core = core_, source = source_, sink = sink_] {
      auto c = std::make_shared<detail::completion<std::optional<R>>>();
      detail::cancel_through(*c, core, sink);
      poll(c, source, core);
      return c;
    });
  }
  /// Every result that is ready (at least one, at most `max`; 0: no limit), in the stream's
  /// order, in one hand-over from fiber's loop: what a loop over millions of small results
  /// wants. Empty after the last one. A task's error is thrown by the call whose batch would
  /// reach it, after the results before it came in the batches before.
  ///   for (auto b = co_await s.next_batch(); !b.empty(); b = co_await s.next_batch()) ...
  op<std::vector<R>> next_batch(std::size_t max = 0) {
    return detail::deferred_op<std::vector<R>>(core_->rt(), [core = core_, source = source_, sink = sink_, max] {
      auto c = std::make_shared<detail::completion<std::vector<R>>>();
      detail::cancel_through(*c, core, sink);
      poll_batch(c, source, core, max ? max : static_cast<std::size_t>(-1));
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
    /// @cond iterator_traits
    using iterator_category = std::input_iterator_tag;
    using value_type = R;
    using difference_type = std::ptrdiff_t;
    using pointer = R*;
    using reference = R&;
    /// @endcond
    /// The end.
    iterator() = default;
    /// The first result of `s` (waiting for it).
    explicit iterator(result_stream* s) : stream_(s) { advance(); }
    /// The current result.
    R& operator*() { return *current_; }
    /// The current result.
    R* operator->() { return &*current_; }
    /// The next result (waiting for it); the end after the last.
    iterator& operator++() {
      advance();
      return *this;
    }
    /// The next result, as ++it.
    void operator++(int) { advance(); }
    /// Equal at the end, or on the same stream.
    friend bool operator==(const iterator& a, const iterator& b) { return a.stream_ == b.stream_; }

   private:
    /// Results come from fiber's loop a batch at a time and are handed out from here: one
    /// trip to the loop per batch, not per result.
    void advance() {
      if (at_ == batch_.size()) {
        batch_.clear();
        at_ = 0;
        batch_ = stream_->next_batch().get();
        if (batch_.empty()) {
          stream_ = nullptr;  // the end
          return;
        }
      }
      current_.emplace(std::move(batch_[at_++]));
    }
    result_stream* stream_ = nullptr;
    std::optional<R> current_;
    std::vector<R> batch_;
    std::size_t at_ = 0;
  };
  /// Waits for the first result.
  iterator begin() { return iterator(this); }
  /// Past the last result.
  iterator end() { return iterator(); }

 private:
  static void poll(std::shared_ptr<detail::completion<std::optional<R>>> c,
                   std::shared_ptr<detail::stream_source<R>> source, std::shared_ptr<detail::pool_core> core) {
    std::optional<R> value;
    std::exception_ptr error;
    bool have = false;
    try {
      have = source->take(value, error);
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

  static void poll_batch(std::shared_ptr<detail::completion<std::vector<R>>> c,
                         std::shared_ptr<detail::stream_source<R>> source, std::shared_ptr<detail::pool_core> core,
                         std::size_t max) {
    std::vector<R> batch;
    std::exception_ptr error;
    bool ended = false;
    // What is ready in one pass; then one at a time, for an error or the end.
    if (!source->held()) source->take_ready(batch, max);
    while (batch.size() < max) {
      std::optional<R> value;
      std::exception_ptr e;
      bool have = false;
      try {
        have = source->take(value, e);
      } catch (...) {
        e = std::current_exception();
        have = true;
      }
      if (!have) break;
      if (e) {
        error = e;
        break;
      }
      if (!value) {
        ended = true;
        break;
      }
      batch.push_back(std::move(*value));
    }
    if (batch.empty() && !error && !ended) {
      source->set_waiter([c, source, core, max] { poll_batch(c, source, core, max); });
      return;
    }
    core->pump();  // room for more results now
    if (error && batch.empty()) return c->set_error(error);
    if (error) source->hold(error);
    c->set_value(std::move(batch));
  }

  std::shared_ptr<detail::pool_core> core_;
  std::shared_ptr<detail::stream_source<R>> source_;
  std::shared_ptr<detail::pool_sink> sink_;
};

/// Worker processes that run registered functions over inputs, like multiprocessing.Pool: map,
/// starmap, imap, apply and their async forms, each an op to `co_await` or `.get()`. Items whose
/// worker dies are sent again (call_options); docs/getting_started.md walks through it.
class FIBER_API pool {
 public:
  /// cpu_count() workers. Workers start now; `ready()` completes when all have.
  pool() : pool(context::default_context(), pool_options{}) {}
  /// `processes` workers (at least 1).
  explicit pool(int processes) : pool(context::default_context(), with_processes(processes)) {}
  /// Workers as `options` say (their number, needs, initializer, limits).
  explicit pool(pool_options options) : pool(context::default_context(), std::move(options)) {}
  /// Workers as `options` say, in `ctx`.
  pool(context& ctx, pool_options options);
  /// `processes` workers in `ctx`.
  pool(context& ctx, int processes) : pool(ctx, with_processes(processes)) {}
  /// Moves the workers' ownership; the moved-from pool owns none.
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
    return starter().template run_map<detail::result_t<R>>(f, std::begin(xs), std::end(xs), detail::size_hint(xs),
                                                           chunksize, detail::encode_one<A>());
  }
  /// As map, taking the items: `pool.map(&f, std::move(xs))`. The pool keeps the vector until
  /// every chunk that holds an item is done with it, so an item of f's parameter type has its
  /// large data (a vector's or a string's elements) sent from where it is, not copied into the
  /// chunk first: for large arguments, one pass over the memory less on the master.
  template <class R, class A, class T>
  op<std::vector<detail::result_t<R>>> map(R (*f)(A), std::vector<T>&& xs, std::size_t chunksize = 0) {
    auto owned = std::make_shared<const std::vector<T>>(std::move(xs));
    return starter().template run_map<detail::result_t<R>>(f, owned->begin(), owned->end(), owned->size(), chunksize,
                                                           detail::encode_owned<A>(owned));
  }
  /// f(args...) for every tuple of arguments in `tuples`.
  template <class R, class... P, class Range>
  op<std::vector<detail::result_t<R>>> starmap(R (*f)(P...), const Range& tuples, std::size_t chunksize = 0) {
    return starter().template run_map<detail::result_t<R>>(f, std::begin(tuples), std::end(tuples),
                                                           detail::size_hint(tuples), chunksize,
                                                           [](writer& w, const auto& t) { detail::encode_args<P...>(w, t); });
  }
  /// f(args...) in a worker.
  template <class R, class... P, class... A>
  op<detail::result_t<R>> apply(R (*f)(P...), A&&... args) {
    return detail::deferred_op<detail::result_t<R>>(rt_, starter().template apply<R, P...>(f, std::forward<A>(args)...));
  }

  /// As map, but already submitted: the returned op may be awaited or waited for any time later.
  /// `xs` is copied.
  template <class R, class A, class Range>
  op<std::vector<detail::result_t<R>>> map_async(R (*f)(A), const Range& xs, std::size_t chunksize = 0) {
    auto copy = std::make_shared<std::vector<std::decay_t<A>>>(std::begin(xs), std::end(xs));
    auto c = starter().template submit_map<detail::result_t<R>>(
        f, copy->begin(), copy->end(), copy->size(), chunksize,
        [copy, encode = detail::encode_one<A>()](writer& w, const auto& x) { encode(w, x); });
    return detail::completion_op(rt_, c);
  }
  /// As map_async, taking the items (`std::move(xs)`): nothing is copied, and their large data
  /// travels from where it is (see map).
  template <class R, class A, class T>
  op<std::vector<detail::result_t<R>>> map_async(R (*f)(A), std::vector<T>&& xs, std::size_t chunksize = 0) {
    auto owned = std::make_shared<const std::vector<T>>(std::move(xs));
    auto c = starter().template submit_map<detail::result_t<R>>(f, owned->begin(), owned->end(), owned->size(), chunksize,
                                                                detail::encode_owned<A>(owned));
    return detail::completion_op(rt_, c);
  }
  /// As starmap, but already submitted; `tuples` is copied.
  template <class R, class... P, class Range>
  op<std::vector<detail::result_t<R>>> starmap_async(R (*f)(P...), const Range& tuples, std::size_t chunksize = 0) {
    using args_t = std::tuple<std::decay_t<P>...>;
    auto copy = std::make_shared<std::vector<args_t>>();
    for (const auto& t : tuples)
      copy->push_back(std::apply([](const auto&... a) { return args_t(a...); }, t));
    auto c = starter().template submit_map<detail::result_t<R>>(f, copy->begin(), copy->end(), copy->size(), chunksize,
                                                                [copy](writer& w, const auto& t) { w.value(t); });
    return detail::completion_op(rt_, c);
  }
  /// As apply, but already submitted: the returned op may be awaited or waited for any time later.
  template <class R, class... P, class... A>
  op<detail::result_t<R>> apply_async(R (*f)(P...), A&&... args) {
    auto start = starter().template apply<R, P...>(f, std::forward<A>(args)...);
    std::shared_ptr<detail::completion<detail::result_t<R>>> c;
    if (detail::in_loop_thread(*rt_)) {
      c = start();
    } else {
      // Submitted as an op starts: this thread takes the loop and submits (no post to the loop
      // and no poll of the sockets before it), as map's start does.
      std::atomic<bool> submitted{false};
      detail::wait_until_started(*rt_, [&] {
        c = start();
        detail::notify_done(*rt_, submitted);
      }, submitted);
    }
    return detail::completion_op(rt_, c);
  }

  /// Results in input order as they become available; `xs` must outlive the stream. At most a
  /// bounded number of results wait for the caller, so a 10-million-item imap stays small.
  /// `chunksize` 0 (the default) chooses as map does for a range that knows its size, at most
  /// stream_chunk_limit items a chunk; for one that does not, chunks grow from 1 to that limit,
  /// so the first results come at once and a long stream still runs at map's pace.
  template <class R, class A, class Range>
  result_stream<detail::result_t<R>> imap(R (*f)(A), const Range& xs, std::size_t chunksize = 0) {
    return run_stream<detail::result_t<R>>(f, std::begin(xs), std::end(xs), detail::size_hint(xs), chunksize,
                                           detail::encode_one<A>(), true);
  }
  /// Results in the order they arrive.
  template <class R, class A, class Range>
  result_stream<detail::result_t<R>> imap_unordered(R (*f)(A), const Range& xs, std::size_t chunksize = 0) {
    return run_stream<detail::result_t<R>>(f, std::begin(xs), std::end(xs), detail::size_hint(xs), chunksize,
                                           detail::encode_one<A>(), false);
  }
  /// The largest chunk imap chooses by itself.
  static constexpr std::size_t stream_chunk_limit = 1024;

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
  /// What the pool did so far: items sent, done, lost and resent, workers started and lost.
  pool_stats stats() const;

 private:
  static pool_options with_processes(int processes) {
    pool_options o;
    o.processes = processes;
    return o;
  }
  detail::pool_starter starter() const { return {rt_, core_, call_options_}; }
  template <class T, class F, class It, class Encode>
  result_stream<T> run_stream(F f, It first, It last, std::size_t hint, std::size_t chunksize, Encode encode,
                              bool ordered) {
    auto sink = starter().template submit_stream<T>(f, first, last, hint, chunksize, std::move(encode), ordered,
                                                    stream_bound(chunksize ? chunksize : stream_chunk_limit),
                                                    stream_chunk_limit);
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
