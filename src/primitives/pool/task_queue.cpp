#include "primitives/pool/task_queue.hpp"

#include <algorithm>
#include <vector>

#include "core/message_limit.hpp"
#include "core/remote_failure.hpp"
#include "fiber/error.hpp"
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
    item_writer items(chunk);
    auto count = sub->sink->next_items(sub->chunksize, items);
    if (!count) {
      sub->input_done = true;
      finish_if_done(*sub);
      continue;
    }
    auto first = sub->next_index;
    sub->next_index += count;
    sub->outstanding += count;
    if (auto over = message_limit_text("the arguments of a chunk", chunk.total_size(), max_message_bytes,
                                       "use a smaller chunksize");
        !over.empty()) {
      auto why = std::make_exception_ptr(error(errc::message_too_large, over));
      for (std::size_t i = 0; i < count; ++i) deliver_error(*sub, first + i, why);
      continue;
    }
    pool_task t;
    t.id = next_task_++;
    t.sub = sub;
    t.first = first;
    t.count = count;
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

void task_queue::sent(pool_task t, const std::string& worker) {
  t.worker = worker;
  auto id = t.id;
  inflight_.emplace(id, std::move(t));
}

void task_queue::on_results(std::uint64_t task_id, const std::string& worker, const std::string& worker_name,
                            multipart&& payload) {
  auto it = inflight_.find(task_id);
  if (it == inflight_.end() || it->second.worker != worker) return;
  auto t = std::move(it->second);
  inflight_.erase(it);
  try {
    if (payload.empty()) throw error(errc::malformed_message, "malformed pool result: no frames");
    auto shared = std::make_shared<multipart>(std::move(payload));
    auto items = unpack(*shared, 0, t.count, true);
    for (std::size_t i = 0; i < t.count; ++i) {
      auto& item = items[i];
      if (item.status == item_value) {
        auto f = std::make_shared<message::frames>();
        f->parts = shared;
        f->head = item.head;
        f->blob_spans = std::move(item.blobs);
        deliver_result(*t.sub, t.first + i, message(std::move(f)));
      } else {
        auto f = remote_failure::decode(std::string_view(reinterpret_cast<const char*>(item.head.data()), item.head.size()));
        if (f.where.empty()) f.where = worker_name;
        deliver_error(*t.sub, t.first + i, f.exception());
      }
    }
  } catch (const std::exception&) {
    fail_items(t, std::current_exception());
  }
}

std::size_t task_queue::items_in(const std::deque<std::uint64_t>& held) const {
  std::size_t items = 0;
  for (auto id : held)
    if (auto t = inflight_.find(id); t != inflight_.end()) items += t->second.count;
  return items;
}

void task_queue::on_worker_lost(const std::deque<std::uint64_t>& held, const std::string& worker_name, bool pool_retry,
                                int max_attempts) {
  bool first = true;
  std::vector<pool_task> requeued;
  for (auto id : held) {
    auto it = inflight_.find(id);
    if (it == inflight_.end()) continue;
    auto t = std::move(it->second);
    inflight_.erase(it);
    if (std::exchange(first, false)) ++t.attempts;
    bool retry = pool_retry && t.sub->retry;
    if (t.attempts > 0 && (!retry || t.attempts >= max_attempts)) {
      fail_items(t, std::make_exception_ptr(error(
                        errc::worker_lost, "a task was running on " + worker_name + " when it died (" +
                                               std::to_string(t.attempts) + " worker(s) lost running it" +
                                               (retry ? "; max_attempts reached)" : "; retries are off)"))));
      continue;
    }
    retried_ += t.count;
    t.worker.clear();
    requeued.push_back(std::move(t));
  }
  // Back at the front of the queue, in their original order.
  for (auto it = requeued.rbegin(); it != requeued.rend(); ++it) queue_.push_front(std::move(*it));
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

bool task_queue::drained() const {
  return queue_.empty() && inflight_.empty() &&
         std::all_of(feeding_.begin(), feeding_.end(), [](auto& s) { return s->input_done; });
}

std::size_t task_queue::queued_items() const {
  std::size_t n = 0;
  for (auto& t : queue_) n += t.count;
  return n;
}

std::size_t task_queue::running_items() const {
  std::size_t n = 0;
  for (auto& [id, t] : inflight_) n += t.count;
  return n;
}

void task_queue::fail_items(pool_task& t, std::exception_ptr e) {
  for (std::size_t i = 0; i < t.count; ++i) deliver_error(*t.sub, t.first + i, e);
}

}  // namespace fiber::detail
