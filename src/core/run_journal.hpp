// What a durable run writes as it goes, so that a master started again with the same run id can
// take up where the last one stopped: records of its maps (which pool, which call of it, what it
// ran on which items) and of their results as they arrive. This file is the format alone: a
// writer that appends records and makes them durable when asked, and a reader that gives back
// every whole record. The pool decides what the records say.
//
// A record is [u32 body size][u32 check: the low half of the body's XXH3-64][body], the body
// [u8 kind][u32 pool][u32 call][u64 index][payload]. A master killed mid-write leaves a torn tail: the reader stops at the last
// record whose size and check hold, says so, and the writer that opens the journal again cuts the
// tail there before it appends. The journal is bounded (journal_max_bytes): an append past it is
// an error naming the key, never a silent stop.
#pragma once
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fiber::detail {

struct journal_record {
  std::uint8_t kind = 0;
  std::uint32_t pool = 0;  // the run's Nth pool
  std::uint32_t call = 0;  // that pool's Mth map
  std::uint64_t index = 0;
  std::string payload;
};

/// Every whole record of the journal at `path`, in order, and where they end.
struct journal_contents {
  std::vector<journal_record> records;
  std::uint64_t whole_bytes = 0;  // the journal's bytes up to the end of its last whole record
  bool torn = false;              // bytes followed that are not a whole record (cut on reopening)
};
/// Reads the journal at `path`; fiber::error(config_error) when it cannot be read, nothing when it
/// does not exist.
journal_contents read_journal(const std::filesystem::path& path);

/// Appends from one thread (the loop) while another makes what was appended durable (sync): the
/// disk's wait never holds the loop.
class journal_writer {
 public:
  /// Appends to the journal at `path` (made 0600 in a 0700 folder; a torn tail cut first; held
  /// with an exclusive lock), which may grow to `max_bytes`.
  journal_writer(const std::filesystem::path& path, std::uint64_t max_bytes);
  ~journal_writer();
  journal_writer(const journal_writer&) = delete;
  journal_writer& operator=(const journal_writer&) = delete;

  /// Buffers `r`; fiber::error(journal_failed) naming journal_max_bytes when the journal would
  /// grow past it (the record is not written).
  void append(const journal_record& r) { append(r.kind, r.pool, r.call, r.index, {std::string_view(r.payload)}); }
  /// The same, its payload the concatenation of `parts`, framed in place (no copy but the
  /// buffer's).
  void append(std::uint8_t kind, std::uint32_t pool, std::uint32_t call, std::uint64_t index,
              std::initializer_list<std::string_view> parts) {
    append(kind, pool, call, index, std::span<const std::string_view>(parts.begin(), parts.size()));
  }
  void append(std::uint8_t kind, std::uint32_t pool, std::uint32_t call, std::uint64_t index,
              std::span<const std::string_view> parts);
  /// Writes what is buffered and makes it durable (fdatasync); from any one thread at a time.
  /// Throws fiber::error(journal_failed) naming the file when the disk refuses; the file then
  /// ends at its last whole record, and what was buffered stays for the next sync.
  void sync();
  /// Whether a record of `payload` bytes would keep the journal within its bound.
  bool fits(std::size_t payload) const;
  /// Bytes buffered and not yet synced.
  std::size_t pending() const;
  /// The journal's size, buffered records included.
  std::uint64_t bytes() const;

 private:
  std::filesystem::path path_;
  std::uint64_t max_bytes_;
  int fd_ = -1;
  mutable std::mutex mutex_;  // buffer_ and written_, between the appender and the syncer
  std::uint64_t written_ = 0;
  std::uint64_t taken_ = 0;   // bytes a sync is writing
  std::string buffer_;
  std::mutex syncing_;        // one sync at a time
  std::string writing_;       // what a sync writes (its buffer, reused)
};

}  // namespace fiber::detail
