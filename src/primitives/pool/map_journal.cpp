#include "primitives/pool/map_journal.hpp"

#include <cstring>
#include <iterator>
#include <xxhash.h>

#include "fiber/detail/pool_items.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

namespace {
template <class T>
void append_raw(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

/// A frame of a journaled message, as unpack reads frames.
struct frame_view {
  const void* bytes;
  std::size_t n;
  const void* data() const { return bytes; }
  std::size_t size() const { return n; }
};

/// The results of a map_results record's payload: f(item, head, large frames) for each value,
/// in order. False when the payload is not one map_journal wrote (nothing is given then).
template <class F>
bool each_result(std::string_view payload, std::uint64_t first, F f) {
  std::uint32_t skip, count, frames;
  constexpr std::size_t fixed = 3 * sizeof(std::uint32_t);
  if (payload.size() < fixed) return false;
  std::memcpy(&skip, payload.data(), sizeof skip);
  std::memcpy(&count, payload.data() + 4, sizeof count);
  std::memcpy(&frames, payload.data() + 8, sizeof frames);
  payload.remove_prefix(fixed);
  // Each frame takes at least its size's bytes: a count past that is refused before anything grows.
  if (frames == 0 || frames > payload.size() / sizeof(std::uint64_t)) return false;
  std::vector<frame_view> views;
  views.reserve(frames);
  for (std::uint32_t i = 0; i < frames; ++i) {
    std::uint64_t n;
    if (payload.size() < sizeof n) return false;
    std::memcpy(&n, payload.data(), sizeof n);
    payload.remove_prefix(sizeof n);
    if (n > payload.size()) return false;
    views.push_back({payload.data(), static_cast<std::size_t>(n)});
    payload.remove_prefix(static_cast<std::size_t>(n));
  }
  if (!payload.empty()) return false;
  std::vector<packed_item> items;
  try {
    items = unpack(views, 0, std::size_t{skip} + count, true);
  } catch (const error&) {
    return false;
  }
  for (std::uint32_t i = 0; i < count; ++i)
    if (auto& item = items[skip + i]; item.status == item_value) f(first + i, item.head, item.blobs);
  return true;
}

/// A chunk record's payload, (count, hash, task), framed in place (no allocation: a chunk at
/// chunksize 1 is a task).
struct chunk_payload {
  chunk_payload(std::uint64_t count, std::uint64_t hash, std::uint64_t task) {
    std::memcpy(bytes, &count, sizeof count);
    std::memcpy(bytes + 8, &hash, sizeof hash);
    std::memcpy(bytes + 16, &task, sizeof task);
  }
  std::string_view view() const { return {bytes, sizeof bytes}; }
  char bytes[3 * sizeof(std::uint64_t)];
};
}  // namespace

std::uint64_t chunk_hash(std::string_view bytes, std::uint64_t seed) {
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), seed);
}

map_journal::map_journal(const journal_contents& past, journal_writer& out) : out_(out) {
  for (auto& r : past.records) {
    auto& m = past_[{r.pool, r.call}];
    switch (r.kind) {
      case map_begin: m.function = r.payload; break;
      case map_chunk:
        // A chunk record of another length is not one this part wrote: it is left out, and the
        // chunk runs again.
        // (count, hash) from a master that did not name its tasks; (count, hash, task) since.
        if (r.payload.size() == 2 * sizeof(std::uint64_t) || r.payload.size() == 3 * sizeof(std::uint64_t)) {
          std::uint64_t count, hash, task = 0;
          std::memcpy(&count, r.payload.data(), sizeof count);
          std::memcpy(&hash, r.payload.data() + sizeof count, sizeof hash);
          if (r.payload.size() > 2 * sizeof count) std::memcpy(&task, r.payload.data() + 2 * sizeof count, sizeof task);
          m.chunks[r.index] = {count, hash};
          m.chunk_tasks[r.index] = task;
          if (task) tasks_[{r.pool, task}] = {r.call, r.index};
        }
        break;
      case map_results:
        // A message this part did not write gives nothing: its items run again.
        each_result(r.payload, r.index, [&](std::uint64_t item, auto head, const auto& blobs) {
          m.results[item] = packed_result(head, blobs);
        });
        break;
      case map_end: m.ended = true; break;
      case pool_worker: {
        // "name\nsecret\nhandle" ("name\nsecret" from a master that did not write the handle);
        // anything else is not a record this part wrote.
        auto nl = r.payload.find('\n');
        if (nl == std::string::npos) break;
        auto rest = r.payload.substr(nl + 1);
        auto second = rest.find('\n');
        workers_[r.pool].push_back({static_cast<std::int64_t>(r.index), r.payload.substr(0, nl), rest.substr(0, second),
                                    second == std::string::npos ? std::string() : rest.substr(second + 1)});
        break;
      }
      default: break;  // another part's record
    }
  }
}

const map_journal::past_map* map_journal::past(std::uint32_t pool, std::uint32_t call) const {
  auto it = past_.find({pool, call});
  return it == past_.end() ? nullptr : &it->second;
}

std::vector<map_journal::past_worker> map_journal::past_workers(std::uint32_t pool) const {
  auto it = workers_.find(pool);
  return it == workers_.end() ? std::vector<past_worker>{} : it->second;
}

std::optional<std::pair<std::uint32_t, std::uint64_t>> map_journal::past_task(std::uint32_t pool, std::uint64_t task) const {
  auto it = tasks_.find({pool, task});
  if (it == tasks_.end()) return std::nullopt;
  return it->second;
}

void map_journal::worker(std::uint32_t pool, std::int64_t pid, std::string_view name, std::string_view secret,
                         std::string_view handle) {
  out_.append({pool_worker, pool, 0, static_cast<std::uint64_t>(pid),
               std::string(name) + "\n" + std::string(secret) + "\n" + std::string(handle)});
}

std::string map_journal::name_of(const key& k) const {
  return "map " + std::to_string(k.second) + " of pool " + std::to_string(k.first);
}

void map_journal::begin(std::uint32_t pool, std::uint32_t call, std::string_view function) {
  key k{pool, call};
  if (auto* p = past(pool, call); p && !p->function.empty()) {
    if (p->function != function)
      throw error(errc::config_error, "the run's journal has " + name_of(k) + " running " + p->function + ", and this run's runs " +
                                          std::string(function) + ": the program changed since that run; start a new run "
                                          "(another run_id) or run the program it ran");
    return;  // written already
  }
  out_.append({map_begin, pool, call, 0, std::string(function)});
}

void map_journal::chunk(std::uint32_t pool, std::uint32_t call, std::uint64_t first, std::uint64_t count,
                        std::uint64_t hash, std::uint64_t task) {
  if (auto* p = past(pool, call)) {
    auto items = "items " + std::to_string(first) + " to " + std::to_string(first + count - 1) + " of " +
                 name_of({pool, call}) + " (" + p->function + ")";
    if (auto it = p->chunks.find(first); it != p->chunks.end() && it->second.first == count) {
      if (it->second.second != hash)
        throw error(errc::config_error, "the run's journal has other inputs for " + items +
                                            " than this run gives it: its input changed since that run; start a new "
                                            "run (another run_id) or give it the same input");
      // Written already, but by another task: the next master finds this master's task too.
      if (auto t = p->chunk_tasks.find(first); task && (t == p->chunk_tasks.end() || t->second != task))
        out_.append(map_chunk, pool, call, first, {chunk_payload(count, hash, task).view()});
      return;
    }
    // A chunk cut otherwise than the journal's (another pool size or chunksize) cannot be compared
    // with it: its items' results would mix two runs' inputs unseen.
    auto after = p->chunks.lower_bound(first);
    bool overlaps = (after != p->chunks.end() && after->first < first + count) ||
                    (after != p->chunks.begin() && std::prev(after)->first + std::prev(after)->second.first > first);
    if (overlaps)
      throw error(errc::config_error, "the run's journal cut " + items + " into other chunks than this run does (its "
                                          "pool's processes or the map's chunksize changed): run it as that run did, "
                                          "or start a new run (another run_id)");
  }
  out_.append(map_chunk, pool, call, first, {chunk_payload(count, hash, task).view()});
}

void map_journal::results(std::uint32_t pool, std::uint32_t call, std::uint64_t first, std::uint32_t skip,
                          std::uint32_t count, std::span<const std::string_view> frames, std::shared_ptr<const void> keep) {
  // [u32 skip][u32 count][u32 frames], then [u64 size][bytes] for each frame.
  std::size_t bytes = 0;
  for (auto& f : frames) bytes += sizeof(std::uint64_t) + f.size();
  // A large record is written from the frames (`keep` holds them) by the writer's thread: its
  // sizes stay with them until then. A small one is copied at once, from sizes_.
  using kept_sizes = std::pair<std::string, std::shared_ptr<const void>>;
  std::shared_ptr<kept_sizes> held;
  if (keep && bytes >= journal_writer::direct_bytes) held = std::make_shared<kept_sizes>(std::string(), std::move(keep));
  auto& sizes = held ? held->first : sizes_;
  sizes.clear();
  append_raw(sizes, skip);
  append_raw(sizes, count);
  append_raw(sizes, static_cast<std::uint32_t>(frames.size()));
  for (auto& f : frames) append_raw(sizes, static_cast<std::uint64_t>(f.size()));
  constexpr std::size_t fixed = 3 * sizeof(std::uint32_t);
  parts_.clear();
  parts_.push_back(std::string_view(sizes).substr(0, fixed));
  for (std::size_t i = 0; i < frames.size(); ++i) {
    parts_.push_back(std::string_view(sizes).substr(fixed + i * sizeof(std::uint64_t), sizeof(std::uint64_t)));
    parts_.push_back(frames[i]);
  }
  out_.append(map_results, pool, call, first, parts_, std::move(held));
}

std::size_t map_journal::results_in(const journal_record& r) {
  if (r.kind != map_results) return 0;
  std::size_t n = 0;
  each_result(r.payload, r.index, [&](std::uint64_t, auto, const auto&) { ++n; });
  return n;
}

std::string map_journal::packed_result(std::span<const std::byte> head, std::span<const std::span<const std::byte>> blobs) {
  std::string out;
  std::size_t total = sizeof(std::uint32_t) + sizeof(std::uint64_t) + head.size();
  for (auto& b : blobs) total += sizeof(std::uint64_t) + b.size();
  out.reserve(total);
  append_raw(out, static_cast<std::uint32_t>(blobs.size()));
  append_raw(out, static_cast<std::uint64_t>(head.size()));
  out.append(reinterpret_cast<const char*>(head.data()), head.size());
  for (auto& b : blobs) {
    append_raw(out, static_cast<std::uint64_t>(b.size()));
    out.append(reinterpret_cast<const char*>(b.data()), b.size());
  }
  return out;
}

void map_journal::end(std::uint32_t pool, std::uint32_t call) { out_.append({map_end, pool, call, 0, {}}); }

}  // namespace fiber::detail
