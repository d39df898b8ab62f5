#include "primitives/pool/task_queue.hpp"

#include <algorithm>
#include <ranges>
#include <vector>

#include "core/remote_failure.hpp"
#include "fiber/error.hpp"
#include "fiber/registry.hpp"
#include "primitives/pool/wire.hpp"

namespace fiber::detail {

pool_task* task_queue::next() {
  while (!queue_.empty() && queue_.front().sub->finished) queue_.pop_front();
  return queue_.empty() ? nullptr : &queue_.front();
}

pool_task task_queue::take_next() {
  auto t = std::move(queue_.front());
  queue_.pop_front();
  return t;
}


void task_queue::sent(pool_task t, const std::string& worker) {
  t.worker = worker;
  auto id = t.id;
  inflight_.emplace(id, std::move(t));
}

void task_queue::on_results(std::uint64_t task_id, const std::string& worker, const std::string& worker_name,
                            multipart&& payload, bool final, std::size_t items, std::size_t skip) {
  auto it = inflight_.find(task_id);
  if (it == inflight_.end() || it->second.worker != worker) return;
  auto& t = it->second;
  std::size_t count = final ? t.count() : items;
  try {
    if (payload.empty()) throw error(errc::malformed_message, "malformed pool result: no frames");
    if (count > t.count() || (!final && count == t.count()))
      throw error(errc::malformed_message, "malformed pool result: more items than its task has left");
    auto shared = std::make_shared<multipart>(std::move(payload));
    auto unpacked = unpack(*shared, 0, skip + count, true);
    auto at = t.position();
    // A durable run's journal takes the message as it came; results it could not take fail.
    auto unjournaled = delivery_.journal_message(*t.sub, at, skip, count, shared);
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
      auto& item = unpacked[skip + i];
      if (item.status == item_value && unjournaled) {
        delivery_.error(*sub, at + i, unjournaled);
      } else if (item.status == item_value) {
        auto& f = (*block)[i];
        f.head = item.head;
        f.blob_spans = std::move(item.blobs);
        delivery_.result(*sub, at + i, message(std::shared_ptr<message::frames>(block, &f)));
      } else {
        auto f = remote_failure::decode(std::string_view(reinterpret_cast<const char*>(item.head.data()), item.head.size()));
        if (f.where.empty()) f.where = worker_name;
        f.item = item_words(*sub, at + i);
        delivery_.error(*sub, at + i, f.exception());
      }
    }
  } catch (const std::exception&) {
    // Nothing was delivered (unpack checks every item first): the task's items left fail.
    auto lost = inflight_.find(task_id);
    if (lost == inflight_.end()) return;
    auto t2 = std::move(lost->second);
    inflight_.erase(lost);
    delivery_.fail_items(t2, std::current_exception());
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
                                int max_attempts, bool retry_memory) {
  auto requeued = losses_.after_death(take_held(held), end, pool_retry, max_attempts, retry_memory);
  requeue_front(requeued);
}

void task_queue::on_timed_out(const std::deque<std::uint64_t>& held, const std::string& worker_name, int max_attempts) {
  auto requeued = losses_.after_timeout(take_held(held), worker_name, max_attempts);
  requeue_front(requeued);
}

void task_queue::requeue_front(std::vector<pool_task>& tasks) {
  // Back at the front of the queue, in their original order.
  for (auto& t : std::views::reverse(tasks)) queue_.push_front(std::move(t));
}

void task_queue::fail_all(const std::exception_ptr& e) {
  std::vector<std::shared_ptr<pool_submission>> subs;
  feeder_.take_where([](const pool_submission&) { return true; }, subs);
  auto queued = std::move(queue_);
  auto inflight = std::move(inflight_);
  queue_.clear();
  inflight_.clear();
  for (auto& t : queued) {
    subs.push_back(t.sub);
    delivery_.fail_items(t, e);
  }
  for (auto& [id, t] : inflight) {
    subs.push_back(t.sub);
    delivery_.fail_items(t, e);
  }
  for (auto& s : subs) {
    if (s->finished) continue;
    s->finished = true;
    if (!s->input_done) s->sink->on_input_failed(s->next_index, e);
    s->sink->on_finished();
  }
}

std::vector<std::uint64_t> task_queue::fail_where(const std::function<bool(const pool_submission&)>& which,
                                                  const std::exception_ptr& e) {
  std::vector<std::shared_ptr<pool_submission>> subs;
  auto pick = [&](const std::shared_ptr<pool_submission>& s) {
    if (!which(*s)) return false;
    if (std::find(subs.begin(), subs.end(), s) == subs.end()) subs.push_back(s);
    return true;
  };
  feeder_.take_where(which, subs);
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
  // Out of every table before the sinks hear of it: what they run may submit more work.
  for (auto& t : dropped) delivery_.fail_items(t, e);
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

bool task_queue::drained() const { return queue_.empty() && inflight_.empty() && !feeder_.reading(); }

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
  feeder_.drop(sub);
}

}  // namespace fiber::detail
