#include "primitives/pool/task_losses.hpp"

#include <algorithm>
#include <cstring>

#include "fiber/error.hpp"
#include "fiber/registry.hpp"

namespace fiber::detail {

namespace {
std::string item_words(const pool_task& t) { return item_words(*t.sub, t.position()); }

constexpr const char* went_past = " went past its worker's memory limit: ";

/// The function's name as FIBER_META takes it: an anonymous namespace's part, which no source
/// spells, left out.
std::string meta_name(std::string name) {
  for (auto part : {"{anonymous}::", "(anonymous namespace)::"})
    for (auto at = name.find(part); at != std::string::npos; at = name.find(part)) name.erase(at, std::strlen(part));
  return name;
}

std::exception_ptr memory_error(const pool_task& t, const worker_end& end, const char* what, const std::string& after) {
  auto* f = find_function(t.sub->function_id);
  auto name = f ? meta_name(std::string(spelled_name(f->name))) : std::string("the function");
  return std::make_exception_ptr(error(
      errc::memory_exceeded,
      item_words(t) + what + end.worker + " was " + memory_stop_text(*end.memory) + after + "; give " + name +
          " more with FIBER_META(" + name +
          ", .memory_mb = N) (or the pool's needs, or mem_per_job), or make it use less; retry_memory_exceeded=true "
          "runs such an item again"));
}
}  // namespace

bool task_losses::failed_for_memory(pool_task& t, const worker_end& end, bool retries) {
  // Sure of the culprit: the item ran alone, or was all its worker held. Otherwise, with
  // retries, the first item runs again alone: should it go past the limit there, it fails then.
  bool sure = t.alone || t.count() == 1;
  if (!sure && retries) return false;
  if (!sure) {  // without retries none runs twice: each may have been the one
    while (t.count())
      delivery_.fail_first(t, memory_error(t, end, " was in the chunk its worker ran, not yet reported, when ", "; retries are off"));
    return true;
  }
  delivery_.fail_first(t, memory_error(t, end, went_past, ""));  // its only item
  return true;
}

std::vector<pool_task> task_losses::after_death(std::vector<pool_task> tasks, const worker_end& end, bool pool_retry,
                                                int max_attempts, bool retry_memory) {
  std::vector<pool_task> requeued;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    auto& t = tasks[i];
    if (i > 0) {  // waiting behind the one it ran: untouched
      retried_ += t.count();
      requeued.push_back(std::move(t));
      continue;
    }
    bool retries = pool_retry && t.sub->retry;
    if (end.memory && !retry_memory && failed_for_memory(t, end, retries)) continue;
    // Nothing its items did: they run again as they were, uncharged. A worker's planned end hands
    // its work back whether or not lost work may run twice: none of it ran to its end.
    if ((end.outside && retries) || end.drained) {
      retried_ += t.count();
      requeued.push_back(std::move(t));
      continue;
    }
    ++t.attempts;
    auto where = " was running on " + end.worker + " when it ended (" + end.how + ")";
    if (!retries) {
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
    auto after = "; " + std::to_string(t.attempts) + " worker(s) lost running it; max_attempts reached";
    auto failure = end.memory ? memory_error(t, end, went_past, after)
                              : std::make_exception_ptr(error(errc::worker_lost, item_words(t) + where + after));
    t.attempts = 0;
    if (!delivery_.fail_first(t, failure)) continue;
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
