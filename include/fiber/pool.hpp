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
#include <cstdint>
#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "fiber/context.hpp"
#include "fiber/detail/channel.hpp"
#include "fiber/detail/completion.hpp"
#include "fiber/meta.hpp"
#include "fiber/op.hpp"
#include "fiber/process.hpp"
#include "fiber/registry.hpp"

namespace fiber {

/// A registered function with its arguments, encoded: what a pool runs once per worker.
struct remote_call {
  detail::encoded_call call;
};
template <class R, class... P, class... A>
remote_call bind_remote(R (*f)(P...), A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "fiber::bind_remote: wrong number of arguments for the function");
  const auto& entry = detail::require_registered(f);
  remote_call c{{entry.id, entry.name, {}}};
  c.call.args.value(std::tuple<std::decay_t<P>...>(std::forward<A>(args)...));
  return c;
}

struct pool_options {
  std::optional<int> processes;  // unset: cpu_count(); at least 1
  int max_attempts = 3;          // a task that took down this many workers fails with worker_lost
  bool retry = true;             // false: a task whose worker died fails at once (never runs twice)
  int maxtasksperchild = 0;      // a worker is replaced after this many chunks; 0: never
  int prefetch = 1;              // chunks a worker may hold beyond the one it runs
  bool progress = false;         // a progress line on stderr for long maps, when it is a terminal
  std::optional<remote_call> initializer;  // run once in each worker before its first task
  meta needs;  // workers start with at least these; a function's FIBER_META raises them (see below)
};

/// Per-call choices, for the calls made through pool::with(...).
struct call_options {
  bool retry = true;  // false: a task whose worker died fails with worker_lost (it never runs twice)
};

struct pool_stats {
  std::size_t queued = 0;        // tasks (items) waiting for a worker
  std::size_t running = 0;       // tasks (items) held by workers
  std::size_t done = 0;          // tasks (items) finished, with a result or an error
  std::size_t retried = 0;       // tasks (items) sent again after their worker died
  std::size_t workers_lost = 0;  // workers that died or stopped answering
  std::size_t workers = 0;       // workers now
};

namespace detail {
class pool_core;

/// Appends one item to a chunk: [u32 inline bytes][u32 large frames][inline bytes]; its large
/// ranges become frames of the chunk (writer::blobs), in order.
template <class Encode>
void append_item(writer& chunk, Encode&& encode) {
  auto& head = chunk.head();
  auto at = head.size();
  head.append(8, '\0');
  auto blobs_before = chunk.blobs().size();
  encode(chunk);
  auto bytes = static_cast<std::uint32_t>(head.size() - at - 8);
  auto blobs = static_cast<std::uint32_t>(chunk.blobs().size() - blobs_before);
  std::memcpy(&head[at], &bytes, 4);
  std::memcpy(&head[at + 4], &blobs, 4);
}

/// One submitted batch of calls; the core calls it on fiber's loop thread.
class pool_sink {
 public:
  virtual ~pool_sink() = default;
  /// Appends up to `n` more items (argument tuples) to `chunk` with append_item; returns how
  /// many (0 when the input has run out).
  virtual std::size_t next_items(std::size_t n, writer& chunk) = 0;
  /// False while the caller has not consumed enough results (imap's bound on memory).
  virtual bool wants_more() const { return true; }
  virtual void on_result(std::size_t index, message result) = 0;
  virtual void on_error(std::size_t index, std::exception_ptr error) = 0;
  /// Every item produced by next_items has had its on_result or on_error.
  virtual void on_finished() = 0;
  /// The pool failed with `error` before the input ran out: the items from position `index`
  /// on were never produced. A sink that delivers items one by one fails each of them.
  virtual void on_input_failed(std::size_t index, std::exception_ptr error) { on_error(index, error); }
};

std::shared_ptr<pool_core> make_pool_core(std::shared_ptr<runtime> rt, pool_options options);
/// On fiber's loop thread. `chunksize` 0: chosen from the input size hint and the pool size.
void pool_submit(const std::shared_ptr<pool_core>& core, std::uint64_t function_id, std::size_t chunksize,
                 std::size_t size_hint, std::shared_ptr<pool_sink> sink, call_options options = {});
/// Runs `f` on the loop with the core (from any thread), waiting for it.
void pool_on_loop(const std::shared_ptr<pool_core>& core, unique_function<void(pool_core&)> f);
void pool_check_open(const pool_core& core);
/// Asks the core to pull more input (after imap's consumer made room).
void pool_pump(pool_core& core);
std::shared_ptr<runtime> pool_runtime(const pool_core& core);

template <class R>
using result_t = std::conditional_t<std::is_void_v<R>, std::monostate, R>;

/// Feeds items from [first, last) and collects results in input order.
template <class R, class It, class Encode>
class map_sink final : public pool_sink {
 public:
  map_sink(It first, It last, Encode encode, std::shared_ptr<completion<std::vector<R>>> done)
      : it_(first), last_(last), encode_(std::move(encode)), done_(std::move(done)) {}
  std::size_t next_items(std::size_t n, writer& chunk) override {
    std::size_t k = 0;
    for (; k < n && it_ != last_ && !done_->done; ++k, ++it_)
      append_item(chunk, [&](writer& w) { encode_(w, *it_); });
    return k;
  }
  void on_result(std::size_t index, message m) override {
    if (done_->done) return;
    try {
      if (results_.size() <= index) results_.resize(index + 1);
      results_[index] = decode_message<R>(m);
    } catch (...) {
      done_->set_error(std::current_exception());
    }
  }
  void on_error(std::size_t, std::exception_ptr e) override { done_->set_error(e); }
  void on_finished() override {
    if (done_->done) return;
    std::vector<R> out;
    out.reserve(results_.size());
    for (auto& r : results_) out.push_back(std::move(*r));
    done_->set_value(std::move(out));
  }

 private:
  It it_, last_;
  Encode encode_;
  std::shared_ptr<completion<std::vector<R>>> done_;
  std::vector<std::optional<R>> results_;
};

/// One call (apply).
template <class R, class Args>
class single_sink final : public pool_sink {
 public:
  single_sink(Args args, std::shared_ptr<completion<R>> done) : args_(std::move(args)), done_(std::move(done)) {}
  std::size_t next_items(std::size_t, writer& chunk) override {
    if (sent_) return 0;
    sent_ = true;
    append_item(chunk, [&](writer& w) { w.value(args_); });
    return 1;
  }
  void on_result(std::size_t, message m) override {
    try {
      done_->set_value(decode_message<R>(m));
    } catch (...) {
      done_->set_error(std::current_exception());
    }
  }
  void on_error(std::size_t, std::exception_ptr e) override { done_->set_error(e); }
  void on_finished() override {}

 private:
  Args args_;
  bool sent_ = false;
  std::shared_ptr<completion<R>> done_;
};

/// What result_stream reads from (on fiber's loop).
template <class R>
class stream_source {
 public:
  virtual ~stream_source() = default;
  /// True with a result (or error) in `out`/`error`, or with neither at the end; false: nothing yet.
  virtual bool try_next(std::optional<R>& out, std::exception_ptr& error) = 0;
  virtual void set_waiter(unique_function<void()> w) = 0;
};

/// imap and imap_unordered: results wait here until the caller takes them, within a bound.
template <class R, class It, class Encode>
class stream_sink final : public pool_sink, public stream_source<R> {
 public:
  stream_sink(It first, It last, Encode encode, bool ordered, std::size_t bound)
      : it_(first), last_(last), encode_(std::move(encode)), ordered_(ordered), bound_(bound) {}
  std::size_t next_items(std::size_t n, writer& chunk) override {
    std::size_t k = 0;
    for (; k < n && it_ != last_; ++k, ++it_) append_item(chunk, [&](writer& w) { encode_(w, *it_); });
    return k;
  }
  bool wants_more() const override { return ready_.size() + parked_.size() < bound_; }
  void on_result(std::size_t index, message m) override { arrive(index, entry{std::in_place_index<1>, std::move(m)}); }
  void on_error(std::size_t index, std::exception_ptr e) override { arrive(index, entry{std::in_place_index<0>, e}); }
  void on_finished() override {
    finished_ = true;
    wake();
  }
  void on_input_failed(std::size_t, std::exception_ptr e) override { rest_failed_ = e; }
  bool try_next(std::optional<R>& out, std::exception_ptr& error) override {
    if (ready_.empty()) {
      if (rest_failed_ && parked_.empty() && it_ != last_) {  // an item the pool never ran
        ++it_;
        error = rest_failed_;
        return true;
      }
      return finished_ && parked_.empty();
    }
    auto r = std::move(ready_.front());
    ready_.pop_front();
    if (r.index() == 0)
      error = std::get<0>(r);
    else
      out.emplace(decode_message<R>(std::get<1>(r)));
    return true;
  }
  void set_waiter(unique_function<void()> w) override { waiter_ = std::move(w); }

 private:
  using entry = std::variant<std::exception_ptr, message>;
  void arrive(std::size_t index, entry r) {
    if (!ordered_) {
      ready_.push_back(std::move(r));
    } else {
      parked_.emplace(index, std::move(r));
      for (auto it = parked_.find(next_); it != parked_.end(); it = parked_.find(++next_)) {
        ready_.push_back(std::move(it->second));
        parked_.erase(it);
      }
    }
    wake();
  }
  void wake() {
    if (auto w = std::move(waiter_)) {
      waiter_ = nullptr;
      w();
    }
  }
  It it_, last_;
  Encode encode_;
  bool ordered_;
  std::size_t bound_;
  std::size_t next_ = 0;
  std::deque<entry> ready_;
  std::map<std::size_t, entry> parked_;
  bool finished_ = false;
  std::exception_ptr rest_failed_;  // the input after what was produced, failed as a whole
  unique_function<void()> waiter_;
};

template <class Range>
std::size_t size_hint(const Range& r) {
  if constexpr (requires { std::size(r); })
    return static_cast<std::size_t>(std::size(r));
  else
    return 0;
}

/// An op that submits its work when first awaited or waited for (map, apply, next).
template <class T, class Start>
op<T> lazy_op(const std::shared_ptr<pool_core>& core, Start start) {
  auto rt = pool_runtime(*core);
  struct body {
    static asio::awaitable<T> run(Start start) {
      auto c = start();  // the coroutine runs on fiber's loop (see op)
      co_return co_await await_completion(c);
    }
  };
  return {rt, body::run(start), [rt, core, start]() {
            std::shared_ptr<completion<T>> c;
            pool_on_loop(core, [&](pool_core&) { c = start(); });
            return block_on_completion(*rt, c);
          }};
}
}  // namespace detail

/// Results of imap/imap_unordered, one at a time: `next()` gives nullopt after the last one.
/// A task that raised makes next() throw its remote_error at that position.
template <class R>
class result_stream {
 public:
  result_stream(std::shared_ptr<detail::pool_core> core, std::shared_ptr<detail::stream_source<R>> source)
      : core_(std::move(core)), source_(std::move(source)) {}

  op<std::optional<R>> next() {
    return detail::lazy_op<std::optional<R>>(core_, [core = core_, source = source_] {
      auto c = std::make_shared<detail::completion<std::optional<R>>>();
      poll(c, source, core);
      return c;
    });
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
    detail::pool_pump(*core);  // room for more results now
    if (error)
      c->set_error(error);
    else
      c->set_value(std::move(value));
  }

  std::shared_ptr<detail::pool_core> core_;
  std::shared_ptr<detail::stream_source<R>> source_;
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
                                          w.value(std::apply([](const auto&... a) { return std::tuple<std::decay_t<P>...>(a...); }, t));
                                        });
  }
  /// f(args...) in a worker.
  template <class R, class... P, class... A>
  op<detail::result_t<R>> apply(R (*f)(P...), A&&... args) {
    return detail::lazy_op<detail::result_t<R>>(core_, apply_starter<R, P...>(f, std::forward<A>(args)...));
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
    detail::pool_on_loop(core_, [&](detail::pool_core&) { c = start(); });
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
    return [](writer& w, const auto& x) { w.value(std::tuple<std::decay_t<A>>(x)); };
  }

  template <class R, class... P, class... A>
  auto apply_starter(R (*f)(P...), A&&... args) {
    static_assert(sizeof...(P) == sizeof...(A), "fiber::pool::apply: wrong number of arguments for the function");
    detail::pool_check_open(*core_);
    using T = detail::result_t<R>;
    using args_t = std::tuple<std::decay_t<P>...>;
    auto id = detail::require_registered(f).id;
    return [core = core_, id, args = args_t(std::forward<A>(args)...), opts = call_options_]() {
      auto c = std::make_shared<detail::completion<T>>();
      detail::pool_submit(core, id, 1, 1, std::make_shared<detail::single_sink<T, args_t>>(args, c), opts);
      return c;
    };
  }

  template <class T, class F, class It, class Encode>
  std::shared_ptr<detail::completion<std::vector<T>>> submit_map(F f, It first, It last, std::size_t hint,
                                                                 std::size_t chunksize, Encode encode) {
    detail::pool_check_open(*core_);
    auto id = detail::require_registered(f).id;
    auto c = std::make_shared<detail::completion<std::vector<T>>>();
    auto sink = std::make_shared<detail::map_sink<T, It, Encode>>(first, last, std::move(encode), c);
    detail::pool_on_loop(core_, [id, chunksize, hint, sink, core = core_, opts = call_options_](detail::pool_core&) {
      detail::pool_submit(core, id, chunksize, hint, sink, opts);
    });
    return c;
  }

  template <class T, class F, class It, class Encode>
  op<std::vector<T>> run_map(F f, It first, It last, std::size_t hint, std::size_t chunksize, Encode encode) {
    detail::pool_check_open(*core_);
    auto id = detail::require_registered(f).id;
    return detail::lazy_op<std::vector<T>>(core_, [core = core_, id, first, last, hint, chunksize, encode,
                                                   opts = call_options_]() {
      auto c = std::make_shared<detail::completion<std::vector<T>>>();
      detail::pool_submit(core, id, chunksize, hint,
                          std::make_shared<detail::map_sink<T, It, Encode>>(first, last, encode, c), opts);
      return c;
    });
  }

  template <class T, class F, class It, class Encode>
  result_stream<T> run_stream(F f, It first, It last, std::size_t chunksize, Encode encode, bool ordered) {
    detail::pool_check_open(*core_);
    auto id = detail::require_registered(f).id;
    auto sink = std::make_shared<detail::stream_sink<T, It, Encode>>(first, last, std::move(encode), ordered,
                                                                     stream_bound(chunksize));
    detail::pool_on_loop(core_, [core = core_, id, chunksize, sink, opts = call_options_](detail::pool_core&) {
      detail::pool_submit(core, id, chunksize, 0, sink, opts);
    });
    return result_stream<T>(core_, sink);
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
