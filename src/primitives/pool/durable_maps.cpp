#include "primitives/pool/durable_maps.hpp"

#include <cstring>
#include <zmq.hpp>

#include "fiber/detail/shared_entry.hpp"
#include "fiber/encoding.hpp"
#include "core/log.hpp"
#include "fiber/error.hpp"
#include "transport/message_frames.hpp"

namespace fiber::detail {

namespace {
std::uint32_t call_of(const pool_submission& sub) { return static_cast<std::uint32_t>(sub.recorded_as); }

std::uint64_t hash_bytes(std::span<const std::byte> b, std::uint64_t h) {
  return chunk_hash(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()), h);
}
}  // namespace

durable_maps::durable_maps(map_journal& journal, std::uint32_t pool, std::function<void()> appended)
    : journal_(journal), pool_(pool), appended_(std::move(appended)) {}

void durable_maps::begin(const pool_submission& sub, std::string_view function) {
  journal_.begin(pool_, call_of(sub), function);
  appended_();
}

std::size_t durable_maps::chunk(const pool_submission& sub, std::size_t first, std::size_t count, std::uint64_t identity,
                               std::uint64_t task) {
  journal_.chunk(pool_, call_of(sub), first, count, identity, task);
  appended_();
  auto* past = journal_.past(pool_, call_of(sub));
  std::size_t held = 0;
  // A chunk runs from its first item without a result: the worker reads the items before it
  // (they may define objects later ones refer to) and skips them. Results journaled after a gap
  // are run again rather than mixed into the middle of a chunk.
  while (past && held < count && past->results.contains(first + held)) ++held;
  return held;
}

bool durable_maps::answered_whole(std::uint32_t call, std::uint64_t first) const {
  auto* past = journal_.past(pool_, call);
  if (!past) return false;
  auto chunk = past->chunks.find(first);
  if (chunk == past->chunks.end()) return false;
  for (auto i = first; i < first + chunk->second.first; ++i)
    if (!past->results.contains(i)) return false;
  return true;
}

void durable_maps::worker(std::int64_t pid, std::string_view name, std::string_view secret, std::string_view handle) {
  journal_.worker(pool_, pid, name, secret, handle);
  appended_();
}

message durable_maps::past_result(const pool_submission& sub, std::size_t index) const {
  auto* past = journal_.past(pool_, call_of(sub));
  return unpack_result(past->results.at(index));
}

std::exception_ptr durable_maps::results(const pool_submission& sub, std::size_t first, std::size_t skip,
                                         std::size_t count, const std::shared_ptr<multipart>& payload) noexcept {
  if (!count) return nullptr;
  try {
    frames_.clear();
    for (auto& f : *payload) frames_.emplace_back(static_cast<const char*>(f.data()), f.size());
    journal_.results(pool_, call_of(sub), first, static_cast<std::uint32_t>(skip), static_cast<std::uint32_t>(count), frames_,
                     payload);
    appended_();
    return nullptr;
  } catch (...) {
    return std::current_exception();
  }
}

void durable_maps::end(const pool_submission& sub) noexcept {
  try {
    journal_.end(pool_, call_of(sub));
    appended_();
  } catch (...) {
    // Past journal_max_bytes: the call's results are all journaled, only its end is not. A master
    // taken up again finds them all and runs nothing of it.
  }
}

std::string durable_maps::pack_result(const message& m) {
  return map_journal::packed_result(m.head(), m.blobs());
}

message durable_maps::unpack_result(std::string_view bytes) {
  auto malformed = [] {
    throw error(errc::journal_failed, "a result in the run's journal is malformed (its record's checksum held): the "
                                      "journal was written by another version of fiber; start a new run (another run_id)");
  };
  auto take = [&](std::size_t n) {
    if (bytes.size() < n) malformed();
    auto part = bytes.substr(0, n);
    bytes.remove_prefix(n);
    return part;
  };
  auto u64 = [&] {
    std::uint64_t v;
    std::memcpy(&v, take(sizeof v).data(), sizeof v);
    return v;
  };
  std::uint32_t frames;
  std::memcpy(&frames, take(sizeof frames).data(), sizeof frames);
  // Each frame takes at least its size's bytes: a count past that is not one this part wrote.
  if (frames > bytes.size() / sizeof(std::uint64_t)) malformed();
  multipart parts;
  parts.reserve(frames + 1);
  for (std::uint32_t i = 0; i <= frames; ++i) {
    auto n = u64();
    if (n > bytes.size()) malformed();
    auto part = take(static_cast<std::size_t>(n));
    parts.emplace_back(part.data(), part.size());
  }
  if (!bytes.empty()) malformed();
  return message(message::frames::whole(std::move(parts)));
}

std::uint64_t durable_maps::identity(const writer& chunk) {
  // Each object's id, where the bytes hold it, counts as its order among the chunk's objects: the
  // head is copied to be rewritten only when the chunk refers to objects.
  bool objects = !chunk.shared_attached().empty();
  std::string rewritten = objects ? chunk.head() : std::string();
  std::uint64_t h = 0;
  std::uint64_t order = 0;
  for (auto& e : chunk.shared_attached()) {
    auto id = e->id();
    char pattern[sizeof id], replacement[sizeof order];
    std::memcpy(pattern, &id, sizeof id);
    ++order;
    std::memcpy(replacement, &order, sizeof order);
    for (auto at = rewritten.find(std::string_view(pattern, sizeof pattern)); at != std::string::npos;
         at = rewritten.find(std::string_view(pattern, sizeof pattern), at + sizeof pattern))
      rewritten.replace(at, sizeof replacement, replacement, sizeof replacement);
    auto [known, fresh] = object_hashes_.try_emplace(id, 0);
    if (fresh) {
      auto type = e->type();
      auto oh = chunk_hash(std::string_view(reinterpret_cast<const char*>(&type), sizeof type));
      oh = hash_bytes(e->head(), oh);
      for (auto& b : e->blobs()) oh = hash_bytes(b, oh);
      known->second = oh;
    }
    h = chunk_hash(std::string_view(reinterpret_cast<const char*>(&known->second), sizeof known->second), h);
  }
  h = chunk_hash(objects ? std::string_view(rewritten) : std::string_view(chunk.head()), h);
  for (auto& b : chunk.blobs()) h = hash_bytes(std::span<const std::byte>(b.data, b.size), h);
  return h;
}

}  // namespace fiber::detail
