#include "primitives/pool/chunk_feeder.hpp"

#include <algorithm>

#include "core/message_limit.hpp"
#include "fiber/detail/shared_entry.hpp"
#include "fiber/error.hpp"
#include "primitives/pool/wire.hpp"

namespace fiber::detail {

void chunk_feeder::feed(std::deque<pool_task>& queue, std::size_t window, std::size_t max_message_bytes,
                        std::uint64_t& next_id) {
  auto it = reading_.begin();
  while (it != reading_.end() && queue.size() < window) {
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
      delivery_.finish_if_done(*sub);
      // A sink that heard of its end may have changed this list (a call dropped, another added):
      // go on from its start rather than from an iterator that may be gone.
      it = reading_.begin();
      continue;
    }
    if (sub->chunksize < sub->grow_to) sub->chunksize = std::min(sub->grow_to, sub->chunksize * 2);
    auto first = sub->next_index;
    sub->next_index += count;
    sub->outstanding += count;
    if (auto why = check(chunk, max_message_bytes)) {
      // The first error may give a map its answer, which drops its input from this list.
      for (std::size_t i = 0; i < count; ++i) delivery_.error(*sub, first + i, why);
      it = reading_.begin();
      continue;
    }
    std::uint64_t identity = 0;
    std::size_t answered = journal_ ? replay(*sub, first, count, chunk, next_id, identity) : 0;
    if (answered == count) {  // the sink may have changed this list (see above)
      it = reading_.begin();
      continue;
    }
    pool_task t;
    t.id = next_id++;
    t.sub = sub;
    t.first = first;
    t.packed = t.end = count;
    t.begin = answered;
    t.shares_objects = chunk.shares_objects();
    t.identity = identity;
    t.args = std::make_shared<writer>(std::move(chunk));
    queue.push_back(std::move(t));
  }
  std::erase_if(reading_, [](auto& s) { return s->input_done; });
}

std::size_t chunk_feeder::replay(pool_submission& sub, std::size_t first, std::size_t count, const writer& chunk,
                                 std::uint64_t task, std::uint64_t& identity) {
  std::size_t held = 0, delivered = 0;
  try {
    identity = journal_->identity(chunk);
    held = journal_->chunk(sub, first, count, identity, task);
    for (; delivered < held; ++delivered)
      delivery_.result(sub, first + delivered, journal_->past_result(sub, first + delivered));
  } catch (const std::exception&) {
    auto why = std::current_exception();
    for (auto i = delivered; i < count; ++i) delivery_.error(sub, first + i, why);
    return count;
  }
  return held;
}

std::exception_ptr chunk_feeder::check(writer& chunk, std::size_t max_message_bytes) const {
  std::size_t attached = 0;
  try {
    for (auto& e : chunk.shared_attached()) {
      publish_shared(*e, shared_bound_);
      if (!shared_in_host_memory_) attached += e->bytes();
    }
  } catch (const std::exception&) {
    return std::current_exception();
  }
  auto over = message_limit_text(attached ? "the arguments of a chunk with the fiber::shared objects they hold"
                                          : "the arguments of a chunk",
                                 chunk.total_size() + attached, max_message_bytes, "use a smaller chunksize");
  return over.empty() ? nullptr : std::make_exception_ptr(error(errc::message_too_large, over));
}

void chunk_feeder::take_where(const std::function<bool(const pool_submission&)>& which,
                              std::vector<std::shared_ptr<pool_submission>>& out) {
  std::erase_if(reading_, [&](const std::shared_ptr<pool_submission>& s) {
    if (!which(*s)) return false;
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    return true;
  });
}

void chunk_feeder::drop(pool_submission& sub) {
  if (sub.input_done) return;
  sub.input_done = true;
  std::erase_if(reading_, [&](const std::shared_ptr<pool_submission>& s) { return s.get() == &sub; });
}

}  // namespace fiber::detail
