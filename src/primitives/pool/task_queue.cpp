#include "primitives/pool/task_queue.hpp"

#include <algorithm>
#include <vector>

#include "core/message_limit.hpp"
#include "core/remote_failure.hpp"
#include "fiber/error.hpp"
#include "fiber/detail/shared_entry.hpp"
#include "fiber/registry.hpp"
#include "primitives/pool/wire.hpp"

namespace fiber::detail {

void task_queue::add(std::shared_ptr<pool_submission> sub) { feeding_.push_back(std::move(sub)); }

void task_queue::feed(std::size_t window, std::size_t max_message_bytes) {
  for (auto it = feeding_.begin(); it != feeding_.end() && queue_.size() < window;) {
    auto sub = *it;
    if (sub->input_done || !sub->sink->wants_more()) {
      ++it;
      continue;
    }
    writer chunk;
    chunk.share_ranges();       // a vector every item holds by reference travels once per chunk
    chunk.send_shared_apart();  // a fiber::shared object, once per worker
    chunk.share_referenced_ranges(&sub->referenced);  // ... and a range items hold by reference
    item_writer items(chunk);
    auto count = sub->sink->next_items(sub->chunksize, items);
    if (!count) {
      sub->input_done = true;
      finish_if_done(*sub);
      continue;
    }
    if (sub->chunksize < sub->grow_to) sub->chunksize = std::min(sub->grow_to, sub->chunksize * 2);
    auto first = sub->next_index;
    sub->next_index += count;
    sub->outstanding += count;
    std::exception_ptr why;
    std::size_t attached = 0;
    try {
      for (auto& e : chunk.shared_attached()) {
        publish_shared(*e, shared_bound_);
        if (!shared_in_host_memory_) attached += e->bytes();
      }
    } catch (const std::exception&) {
      why = std::current_exception();
    }
    if (auto over = message_limit_text(attached ? "the arguments of a chunk with the fiber::shared objects they hold"
                                                : "the arguments of a chunk",
                                       chunk.total_size() + attached, max_message_bytes, "use a smaller chunksize");
        !why && !over.empty())
      why = std::make_exception_ptr(error(errc::message_too_large, over));
    if (why) {
      for (std::size_t i = 0; i < count; ++i) deliver_error(*sub, first + i, why);
      continue;
    }
    pool_task t;
    t.id = next_task_++;
    t.sub = sub;
    t.first = first;
    t.packed = t.end = count;
    t.shares_objects = chunk.shares_objects();
    t.args = std::make_shared<writer>(std::move(chunk));
    queue_.push_back(std::move(t));
  }
  std::erase_if(feeding_, [](auto& s) { return s->input_done; });
}

pool_task* task_queue::next() {
  while (!queue_.empty() && queue_.front().sub->finished) queue_.pop_front();
  return queue_.empty() ? nullptr : &queue_.front();
}

pool_task task_queue::take_next() {
  auto t = std::move(queue_.front());
  queue_.pop_front();
  return t;
}

namespace {
std::string item_words(const pool_submission& sub, std::size_t index) {
  auto* f = find_function(sub.function_id);
  return "item " + std::to_string(index) + " (" + (f ? std::string(spelled_name(f->name)) : "a pool function") + ")";
}
std::string item_words(const pool_task& t) { return item_words(*t.sub, t.position()); }
}  // namespace

void task_queue::sent(pool_task t, const std::string& worker) {
  t.worker = worker;
  auto id = t.id;
  inflight_.emplace(id, std::move(t));
}

void task_queue::on_results(std::uint64_t task_id, const std::string& worker, const std::string& worker_name,
                            multipart&& payload, bool final, std::size_t items) {
  auto it = inflight_.find(task_id);
  if (it == inflight_.end() || it->second.worker != worker) return;
  auto& t = it->second;
  std::size_t count = final ? t.count() : items;
  try {
    if (payload.empty()) throw error(errc::malformed_message, "malformed pool result: no frames");
    if (count > t.count() || (!final && count == t.count()))
      throw error(errc::malformed_message, "malformed pool result: more items than its task has left");
    auto shared = std::make_shared<multipart>(std::move(payload));
    auto unpacked = unpack(*shared, 0, count, true);
    auto at = t.position();
    t.begin += count;
    if (count) t.attempts = 0;  // the item charged has its result: it was not what killed a worker
    // The task leaves the flight before its items reach the sinks: a sink may submit more.
    auto sub = t.sub;
    if (final) inflight_.erase(it);
    // One block of frames for the chunk's results, each result's message pointing into it: a
    // result kept (imap's) keeps the block, which keeps the chunk's bytes, as each item's own
    // frames kept them before; one allocation a chunk instead of one an item.
    auto block = std::make_shared<std::vector<message::frames>>(count);
    if (count) (*block)[0].parts = shared;
    for (std::size_t i = 0; i < count; ++i) {
      auto& item = unpacked[i];
      if (item.status == item_value) {
        auto& f = (*block)[i];
        f.head = item.head;
        f.blob_spans = std::move(item.blobs);
        deliver_result(*sub, at + i, message(std::shared_ptr<message::frames>(block, &f)));
      } else {
        auto f = remote_failure::decode(std::string_view(reinterpret_cast<const char*>(item.head.data()), item.head.size()));
        if (f.where.empty()) f.where = worker_name;
        f.item = item_words(*sub, at + i);
        deliver_error(*sub, at + i, f.exception());
      }
    }
  } catch (const std::exception&) {
    // Nothing was delivered (unpack checks every item first): the task's items left fail.
    auto lost = inflight_.find(task_id);
    if (lost == inflight_.end()) return;
    auto t2 = std::move(lost->second);
    inflight_.erase(lost);
    fail_items(t2, std::current_exception());
  }
}

const pool_task* task_queue::in_flight(std::uint64_t task_id) const {
  auto it = inflight_.find(task_id);
  return it == inflight_.end() ? nullptr : &it->second;
}

std::size_t task_queue::items_in(const std::deque<std::uint64_t>& held) const {
  std::size_t items = 0;
  for (auto id : held)
    if (auto t = inflight_.find(id); t != inflight_.end()) items += t->second.count();
  return items;
}

std::vector<pool_task> task_queue::take_held(const std::deque<std::uint64_t>& held) {
  std::vector<pool_task> out;
  for (auto id : held) {
    auto it = inflight_.find(id);
    if (it == inflight_.end()) continue;
    out.push_back(std::move(it->second));
    inflight_.erase(it);
    out.back().worker.clear();
  }
  return out;
}

void task_queue::on_worker_lost(const std::deque<std::uint64_t>& held, const worker_end& end, bool pool_retry,
                                int max_attempts) {
  auto tasks = take_held(held);
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
        fail_first(t, std::make_exception_ptr(error(errc::worker_lost, why)));
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
    if (!fail_first(t, std::make_exception_ptr(error(errc::worker_lost, why)))) continue;
    retried_ += t.count();
    t.careful = true;
    requeued.push_back(std::move(t));
  }
  requeue_front(requeued);
}

void task_queue::split_charged(pool_task&& t, std::vector<pool_task>& out) {
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
    piece.id = next_task_++;
    piece.begin = next;
    piece.end = std::min(end, next + size);
    piece.attempts = 0;
    piece.alone = false;
    piece.careful = true;
    out.push_back(piece);
  }
}

void task_queue::on_timed_out(const std::deque<std::uint64_t>& held, const std::string& worker_name, int max_attempts) {
  auto tasks = take_held(held);
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
      if (!fail_first(t, std::make_exception_ptr(error(errc::timed_out, why)))) continue;
      t.careful = true;
    }
    retried_ += t.count();
    requeued.push_back(std::move(t));
  }
  requeue_front(requeued);
}

void task_queue::requeue_front(std::vector<pool_task>& tasks) {
  // Back at the front of the queue, in their original order.
  for (auto it = tasks.rbegin(); it != tasks.rend(); ++it) queue_.push_front(std::move(*it));
}

void task_queue::fail_all(std::exception_ptr e) {
  std::vector<std::shared_ptr<pool_submission>> subs(feeding_.begin(), feeding_.end());
  auto queued = std::move(queue_);
  auto inflight = std::move(inflight_);
  queue_.clear();
  inflight_.clear();
  feeding_.clear();
  for (auto& t : queued) {
    subs.push_back(t.sub);
    fail_items(t, e);
  }
  for (auto& [id, t] : inflight) {
    subs.push_back(t.sub);
    fail_items(t, e);
  }
  for (auto& s : subs) {
    if (s->finished) continue;
    s->finished = true;
    if (!s->input_done) s->sink->on_input_failed(s->next_index, e);
    s->sink->on_finished();
  }
}

std::vector<std::uint64_t> task_queue::fail_where(const std::function<bool(const pool_submission&)>& which,
                                                  std::exception_ptr e) {
  std::vector<std::shared_ptr<pool_submission>> subs;
  auto pick = [&](const std::shared_ptr<pool_submission>& s) {
    if (!which(*s)) return false;
    if (std::find(subs.begin(), subs.end(), s) == subs.end()) subs.push_back(s);
    return true;
  };
  for (auto& s : feeding_) (void)pick(s);
  std::vector<pool_task> dropped;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (pick(it->sub)) {
      dropped.push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  std::vector<std::uint64_t> stopped;
  for (auto it = inflight_.begin(); it != inflight_.end();) {
    if (pick(it->second.sub)) {
      stopped.push_back(it->first);
      dropped.push_back(std::move(it->second));
      it = inflight_.erase(it);
    } else {
      ++it;
    }
  }
  std::erase_if(feeding_, [&](auto& s) { return std::find(subs.begin(), subs.end(), s) != subs.end(); });
  // Out of every table before the sinks hear of it: what they run may submit more work.
  for (auto& t : dropped) fail_items(t, e);
  for (auto& s : subs) {
    if (s->finished) continue;
    s->finished = true;
    if (!s->input_done) {
      s->input_done = true;
      s->sink->on_input_failed(s->next_index, e);
    }
    s->sink->on_finished();
  }
  return stopped;
}

void task_queue::put_back_held(const std::deque<std::uint64_t>& held) {
  auto back = take_held(held);
  requeue_front(back);
}

bool task_queue::drained() const {
  return queue_.empty() && inflight_.empty() &&
         std::all_of(feeding_.begin(), feeding_.end(), [](auto& s) { return s->input_done; });
}

std::size_t task_queue::queued_items() const {
  std::size_t n = 0;
  for (auto& t : queue_) n += t.count();
  return n;
}

std::size_t task_queue::running_items() const {
  std::size_t n = 0;
  for (auto& [id, t] : inflight_) n += t.count();
  return n;
}

void task_queue::drop_queued(pool_submission& sub) {
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->sub.get() == &sub) {
      sub.outstanding -= it->count();
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  if (!sub.input_done) {
    sub.input_done = true;
    std::erase_if(feeding_, [&](const std::shared_ptr<pool_submission>& s) { return s.get() == &sub; });
  }
}

void task_queue::fail_items(pool_task& t, std::exception_ptr e) {
  while (t.count()) fail_first(t, e);
}

bool task_queue::fail_first(pool_task& t, std::exception_ptr e) {
  auto at = t.position();
  ++t.begin;
  deliver_error(*t.sub, at, std::move(e));
  return t.count() > 0;
}

}  // namespace fiber::detail
