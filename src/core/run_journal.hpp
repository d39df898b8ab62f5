// What a durable run writes as it goes, so that a master started again with the same run id can
// take up where the last one stopped: records of its maps (which pool, which call of it, what it
// ran on which items) and of their results as they arrive. This file is the format alone: a
// writer that appends records and makes them durable when asked, and a reader that gives back
// every whole record. The pool decides what the records say.
//
// A record is [u32 body size][u32 CRC-32 of the body][body], the body [u8 kind][u32 pool][u32 call]
// [u64 index][payload]. A master killed mid-write leaves a torn tail: the reader stops at the last
// record whose size and CRC hold, says so, and the writer that opens the journal again cuts the
// tail there before it appends. The journal is bounded (journal_max_bytes): an append past it is
// an error naming the key, never a silent stop.
#pragma once
#include <cstdint>
#include <filesystem>
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

class journal_writer {
 public:
  /// Appends to the journal at `path` (made 0600 in a 0700 folder; a torn tail cut first), which
  /// may grow to `max_bytes`.
  journal_writer(const std::filesystem::path& path, std::uint64_t max_bytes);
  ~journal_writer();
  journal_writer(const journal_writer&) = delete;
  journal_writer& operator=(const journal_writer&) = delete;

  /// Buffers `r`; fiber::error(journal_failed) naming journal_max_bytes when the journal would
  /// grow past it (the record is not written).
  void append(const journal_record& r);
  /// Writes what is buffered and makes it durable (fdatasync). Throws fiber::error(journal_failed)
  /// naming the file when the disk refuses; the file then ends at its last whole record, and what
  /// was buffered stays for the next sync.
  void sync();
  /// Bytes buffered and not yet synced.
  std::size_t pending() const noexcept { return buffer_.size(); }
  /// The journal's size, buffered records included.
  std::uint64_t bytes() const noexcept { return written_ + buffer_.size(); }

 private:
  std::filesystem::path path_;
  std::uint64_t max_bytes_;
  int fd_ = -1;
  std::uint64_t written_ = 0;
  std::string buffer_;
};

}  // namespace fiber::detail
