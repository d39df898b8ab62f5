#include "primitives/pool/task_losses.hpp"

#include <algorithm>

#include "fiber/error.hpp"

namespace fiber::detail {

namespace {
std::string item_words(const pool_task& t) { return item_words(*t.sub, t.position()); }
}  // namespace

std::vector<pool_task> task_losses::after_death(std::vector<pool_task> tasks, const worker_end& end, bool pool_retry,
                                                int max_attempts) {
  std::vector<pool_task> requeued;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    auto& t = tasks[i];
    if (i > 0) {  // waiting behind the one it ran: untouched
      retried_ += t.count();
      requeued.push_back(std::move(t));
      continue;
    }
    ++t.attempts;
    auto where = " was running on " + end.worker + " when it ended (" + end.how + ")";
    if (!(pool_retry && t.sub->retry)) {
      // Items after the last report may have run: none runs twice.
      while (t.count()) {
        auto why = item_words(t) + (t.attempts ? where : " was in the same chunk, not yet reported, when " + end.worker +
                                                              " ended (" + end.how + ")") +
                   "; retries are off";
        t.attempts = 0;
        delivery_.fail_first(t, std::make_exception_ptr(error(errc::worker_lost, why)));
      }
      continue;
    }
    if (t.attempts < max_attempts) {
      retried_ += t.count();
      split_charged(std::move(t), requeued);
      continue;
    }
    auto why = item_words(t) + where + "; " + std::to_string(t.attempts) + " worker(s) lost running it; max_attempts reached";
    t.attempts = 0;
    if (!delivery_.fail_first(t, std::make_exception_ptr(error(errc::worker_lost, why)))) continue;
    retried_ += t.count();
    t.careful = true;
    requeued.push_back(std::move(t));
  }
  return requeued;
}

void task_losses::split_charged(pool_task&& t, std::vector<pool_task>& out) {
  // A worker killed right after sending a report can take the report with it: the item charged
  // may have finished, and the one that killed it come after. Alone, with nothing after it on
  // its worker, a charged item's next death is its own, and its result cannot be lost to another.
  auto end = t.end;
  t.end = t.begin + 1;
  t.alone = true;
  auto next = t.end;
  pool_task piece = t;
  out.push_back(std::move(t));
  // The rest, in pieces of a quarter chunk, so that several workers share it rather than one
  // running it all while the others may be idle. Each reports item by item at first: the item
  // that killed the worker may be in any of them when items are tiny.
  const auto size = std::max<std::size_t>(1, piece.sub->chunksize / 4);
  for (; next < end; next += size) {
    piece.id = next_id_++;
    piece.begin = next;
    piece.end = std::min(end, next + size);
    piece.attempts = 0;
    piece.alone = false;
    piece.careful = true;
    out.push_back(piece);
  }
}

std::vector<pool_task> task_losses::after_timeout(std::vector<pool_task> tasks, const std::string& worker_name,
                                                  int max_attempts) {
  std::vector<pool_task> requeued;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    auto& t = tasks[i];
    if (i == 0) {  // the one that ran too long
      auto& sub = *t.sub;
      if (sub.retry_timed_out && ++t.attempts < max_attempts) {
        retried_ += t.count();
        split_charged(std::move(t), requeued);
        continue;
      }
      auto why = item_words(t) + " ran longer than its task_timeout (" + std::to_string(sub.timeout.count()) +
                 " ms) on " + worker_name + "; its worker was killed" +
                 (sub.retry_timed_out ? " (" + std::to_string(t.attempts) + " attempts; max_attempts reached)" : "");
      t.attempts = 0;
      if (!delivery_.fail_first(t, std::make_exception_ptr(error(errc::timed_out, why)))) continue;
      t.careful = true;
    }
    retried_ += t.count();
    requeued.push_back(std::move(t));
  }
  return requeued;
}

}  // namespace fiber::detail
