// The sinks of fiber::pool's templates: each feeds a submission's items and takes its results
// (map, apply, imap); the pool's core (fiber/detail/pool_core.hpp) calls them on fiber's loop.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <iterator>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "fiber/codec.hpp"
#include "fiber/detail/completion.hpp"
#include "fiber/detail/message.hpp"
#include "fiber/detail/pool_items.hpp"
#include "fiber/detail/unique_function.hpp"
#include "fiber/op.hpp"
#include "fiber/pool_options.hpp"

namespace fiber {
namespace detail {

/// One submitted batch of calls; the core calls it on fiber's loop thread.
class pool_sink {
 public:
  virtual ~pool_sink() = default;
  /// Appends up to `n` more items (argument tuples) to `chunk`; returns how many (0 when the
  /// input has run out).
  virtual std::size_t next_items(std::size_t n, item_writer& chunk) = 0;
  /// False while the caller has not consumed enough results (imap's bound on memory).
  virtual bool wants_more() const { return true; }
  virtual void on_result(std::size_t index, message result) = 0;
  virtual void on_error(std::size_t index, std::exception_ptr error) = 0;
  /// Every item produced by next_items has had its on_result or on_error.
  virtual void on_finished() = 0;
  /// The pool failed with `error` before the input ran out: the items from position `index`
  /// on were never produced. A sink that delivers items one by one fails each of them.
  virtual void on_input_failed(std::size_t index, std::exception_ptr error) { on_error(index, std::move(error)); }
  /// True once the caller has its answer for the whole call (a map that failed): the call's items
  /// still queued are of no use and are dropped. A stream, which hands every item its own
  /// outcome, never is.
  virtual bool answered() const { return false; }
  /// The largest chunk the pool may choose for this call when the caller chose none (0: no
  /// limit): a stream keeps its waiting results bounded by it.
  virtual std::size_t chunk_limit() const { return 0; }
};

template <class R>
using result_t = std::conditional_t<std::is_void_v<R>, std::monostate, R>;

/// Feeds items from [first, last) and collects results in input order.
template <class R, class It, class Encode>
class map_sink final : public pool_sink {
 public:
  map_sink(It first, It last, Encode encode, std::shared_ptr<completion<std::vector<R>>> done)
      : it_(first), last_(last), encode_(std::move(encode)), done_(std::move(done)) {}
  std::size_t next_items(std::size_t n, item_writer& chunk) override {
    std::size_t k = 0;
    for (; k < n && it_ != last_ && !done_->done; ++k, ++it_)
      chunk.add([&](writer& w) { encode_(w, *it_); });
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
  bool answered() const override { return done_->done; }
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
  std::size_t next_items(std::size_t, item_writer& chunk) override {
    if (sent_) return 0;
    sent_ = true;
    chunk.add([&](writer& w) { w.value(args_); });
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
  /// Moves the results ready now onto `out`, up to `max` of it, stopping before an error: what
  /// try_next gives one at a time, in one pass.
  virtual void take_ready(std::vector<R>& out, std::size_t max) = 0;

  /// As try_next, an error held back by a batch first.
  bool take(std::optional<R>& out, std::exception_ptr& error) {
    if (held_) {
      error = std::exchange(held_, nullptr);
      return true;
    }
    return try_next(out, error);
  }
  /// A batch ended at an error: the error is the next call's answer, after the results before it.
  void hold(std::exception_ptr error) { held_ = std::move(error); }
  bool held() const { return held_ != nullptr; }

 private:
  std::exception_ptr held_;
};

/// imap and imap_unordered: results wait here until the caller takes them, within a bound.
template <class R, class It, class Encode>
class stream_sink final : public pool_sink, public stream_source<R> {
 public:
  stream_sink(It first, It last, Encode encode, bool ordered, std::size_t bound, std::size_t chunk_limit)
      : it_(first), last_(last), encode_(std::move(encode)), ordered_(ordered), bound_(bound), chunk_limit_(chunk_limit) {}
  std::size_t chunk_limit() const override { return chunk_limit_; }
  std::size_t next_items(std::size_t n, item_writer& chunk) override {
    std::size_t k = 0;
    for (; k < n && it_ != last_; ++k, ++it_) chunk.add([&](writer& w) { encode_(w, *it_); });
    return k;
  }
  bool wants_more() const override { return ready_.size() + parked_ < bound_; }
  void on_result(std::size_t index, message m) override {
    // Decoded as it arrives, as map's are: a result waits as its value, not as a reference to
    // the frames it came in (an atomic count per item, and frames kept for as long as any of
    // their items waits).
    try {
      arrive(index, entry{std::in_place_index<1>, decode_message<R>(m)});
    } catch (...) {
      arrive(index, entry{std::in_place_index<0>, std::current_exception()});
    }
  }
  void on_error(std::size_t index, std::exception_ptr e) override { arrive(index, entry{std::in_place_index<0>, e}); }
  void on_finished() override {
    finished_ = true;
    wake();
  }
  void on_input_failed(std::size_t, std::exception_ptr e) override { rest_failed_ = e; }
  bool try_next(std::optional<R>& out, std::exception_ptr& error) override {
    if (ready_.empty()) {
      if (rest_failed_ && parked_ == 0 && it_ != last_) {  // an item the pool never ran
        ++it_;
        error = rest_failed_;
        return true;
      }
      return finished_ && parked_ == 0;
    }
    auto& r = ready_.front();
    if (r.index() == 0)
      error = std::get<0>(r);
    else
      out.emplace(std::move(std::get<1>(r)));
    ready_.pop_front();
    return true;
  }
  void set_waiter(unique_function<void()> w) override { waiter_ = std::move(w); }
  void take_ready(std::vector<R>& out, std::size_t max) override {
    while (out.size() < max && !ready_.empty() && ready_.front().index() == 1) {
      out.push_back(std::move(std::get<1>(ready_.front())));
      ready_.pop_front();
    }
  }

 private:
  using entry = std::variant<std::exception_ptr, R>;
  void arrive(std::size_t index, entry r) {
    if (!ordered_) {
      ready_.push_back(std::move(r));
      return wake();
    }
    // Ahead of one still to come, it waits in its place in the window after the next in order:
    // a whole chunk of another worker's may wait so, and a slot each is no allocation each.
    if (index < next_) return;  // delivered already: the pool gives each index one outcome
    if (index != next_) {
      auto at = index - next_;
      if (window_.size() <= at) window_.resize(at + 1);
      window_[at].emplace(std::move(r));
      ++parked_;
      return;
    }
    // The next in order (a chunk's results arrive so, one after another) goes straight on, and
    // then those waiting behind it.
    ready_.push_back(std::move(r));
    ++next_;
    if (!window_.empty()) {
      window_.pop_front();  // its own slot, empty
      while (!window_.empty() && window_.front()) {
        ready_.push_back(std::move(*window_.front()));
        window_.pop_front();
        --parked_;
        ++next_;
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
  std::size_t chunk_limit_;
  std::size_t next_ = 0;
  std::deque<entry> ready_;
  std::deque<std::optional<entry>> window_;  // from next_ on: those that came before their turn
  std::size_t parked_ = 0;                   // how many of window_'s slots hold one
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

}  // namespace detail
}  // namespace fiber
