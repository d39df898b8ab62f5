#include "primitives/pool/map_journal.hpp"

#include <cstring>
#include <iterator>
#include <xxhash.h>

#include "fiber/error.hpp"

namespace fiber::detail {

namespace {
std::string u64s(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  std::string out(3 * sizeof a, '\0');
  std::memcpy(out.data(), &a, sizeof a);
  std::memcpy(out.data() + sizeof a, &b, sizeof b);
  std::memcpy(out.data() + 2 * sizeof a, &c, sizeof c);
  return out;
}
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
      case map_result: {
        // [u32 size][bytes] per item, from item `index` on; a size past the record's end is not
        // one this part wrote: the items from there run again.
        std::string_view rest(r.payload);
        for (auto i = r.index; rest.size() >= sizeof(std::uint32_t); ++i) {
          std::uint32_t n;
          std::memcpy(&n, rest.data(), sizeof n);
          rest.remove_prefix(sizeof n);
          if (n > rest.size()) break;
          m.results[i] = std::string(rest.substr(0, n));
          rest.remove_prefix(n);
        }
        break;
      }
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
        out_.append({map_chunk, pool, call, first, u64s(count, hash, task)});
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
  out_.append({map_chunk, pool, call, first, u64s(count, hash, task)});
}

void map_journal::add_result(std::string& batch, std::span<const std::string_view> parts) {
  std::uint32_t n = 0;
  for (auto& p : parts) n += static_cast<std::uint32_t>(p.size());
  batch.append(reinterpret_cast<const char*>(&n), sizeof n);
  for (auto& p : parts) batch.append(p);
}

void map_journal::result(std::uint32_t pool, std::uint32_t call, std::uint64_t index, std::string_view bytes) {
  std::string batch;
  add_result(batch, std::span<const std::string_view>(&bytes, 1));
  results(pool, call, index, batch);
}

void map_journal::end(std::uint32_t pool, std::uint32_t call) { out_.append({map_end, pool, call, 0, {}}); }

}  // namespace fiber::detail
