// The items' way back to their callers: each result or error handed to its submission's sink at
// its position, the submission finished once its input ran out and every item it produced was
// delivered, and the count of items delivered. A sink that has its answer after an error (a map
// that failed) is named to `on_answered`, whose owner drops what that call has queued and not yet
// read. On fiber's loop thread.
#pragma once
#include <cstddef>
#include <exception>
#include <functional>
#include <string>
#include <utility>

#include "primitives/pool/durable_maps.hpp"
#include "primitives/pool/pool_submission.hpp"

namespace fiber::detail {

/// "item 3 (square)": how errors name an item of `sub`.
std::string item_words(const pool_submission& sub, std::size_t index);

class item_delivery {
 public:
  using answered_fn = std::function<void(pool_submission&)>;
  explicit item_delivery(answered_fn on_answered) : on_answered_(std::move(on_answered)) {}
  /// A durable run's pool journals each result and each call's end there.
  void journal(durable_maps* j) noexcept { journal_ = j; }
  /// Told each call's end, once its last item was delivered (the flight recorder's map_end).
  void on_end(std::function<void(const pool_submission&)> f) { on_end_ = std::move(f); }

  /// A worker's message of results arrived, its entries [skip, skip + count) being items [first,
  /// first + count) of `sub`: a durable pool journals it whole before its items are delivered.
  /// The error its results fail with when it cannot be; null when it was (or needs not be).
  std::exception_ptr journal_message(const pool_submission& sub, std::size_t first, std::size_t skip, std::size_t count,
                             const std::shared_ptr<multipart>& payload) noexcept {
    return journal_ ? journal_->results(sub, first, skip, count, payload) : nullptr;
  }
  // Inline: they run once per item, in the queue's loop over a chunk's results.
  void result(pool_submission& sub, std::size_t index, message&& m) {
    ++done_;
    --sub.outstanding;
    if (!sub.finished) sub.sink->on_result(index, std::move(m));
    finish_if_done(sub);
  }
  void error(pool_submission& sub, std::size_t index, std::exception_ptr e) {
    ++done_;
    --sub.outstanding;
    if (!sub.finished) sub.sink->on_error(index, std::move(e));
    if (!sub.finished && sub.sink->answered()) on_answered_(sub);
    finish_if_done(sub);
  }
  void finish_if_done(pool_submission& sub) {
    if (sub.finished || !sub.input_done || sub.outstanding) return;
    sub.finished = true;
    if (journal_) journal_->end(sub);
    if (on_end_) on_end_(sub);
    sub.sink->on_finished();
  }

  /// `t`'s first item not yet delivered fails with `e`; false when it was the task's last.
  bool fail_first(pool_task& t, std::exception_ptr e);
  /// Every item of `t` not yet delivered fails with `e`.
  void fail_items(pool_task& t, const std::exception_ptr& e);

  std::size_t done() const { return done_; }

 private:
  answered_fn on_answered_;
  durable_maps* journal_ = nullptr;
  std::function<void(const pool_submission&)> on_end_;
  std::size_t done_ = 0;
};

}  // namespace fiber::detail
