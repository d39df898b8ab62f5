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
#include <array>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

struct XXH3_state_s;

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

/// Appends from one thread (the loop) while a thread of the writer's own writes what was appended
/// and makes it durable when asked (sync_soon): neither the disk's wait nor the copy into the page
/// cache holds the loop. A large record whose bytes the caller keeps alive (`keep`) is not copied
/// here at all: the thread writes it from them, hashing it on the way.
class journal_writer {
 public:
  /// A record this large, with its bytes kept alive, is referenced rather than copied; appends
  /// this large since the thread last wrote wake it to write them.
  static constexpr std::size_t direct_bytes = std::size_t{64} << 10;
  /// How far the journal is durable after a sync_soon (every record before that offset), or why
  /// it is not (what was not written stays for the next).
  using synced_fn = std::function<void(std::uint64_t upto, std::exception_ptr failed)>;

  /// Appends to the journal at `path` (made 0600 in a 0700 folder; a torn tail cut first; held
  /// with an exclusive lock), which may grow to `max_bytes`.
  journal_writer(const std::filesystem::path& path, std::uint64_t max_bytes);
  /// Writes what was appended and makes it durable; a failure then has nobody left to tell.
  ~journal_writer();
  journal_writer(const journal_writer&) = delete;
  journal_writer& operator=(const journal_writer&) = delete;

  /// Appends `r`; fiber::error(journal_failed) naming journal_max_bytes when the journal would
  /// grow past it (the record is not written). A disk that refuses the write is not this call's
  /// error: the record stays, and the next sync says why.
  void append(const journal_record& r) { append(r.kind, r.pool, r.call, r.index, {std::string_view(r.payload)}); }
  /// The same, its payload the concatenation of `parts`.
  void append(std::uint8_t kind, std::uint32_t pool, std::uint32_t call, std::uint64_t index,
              std::initializer_list<std::string_view> parts) {
    append(kind, pool, call, index, std::span<const std::string_view>(parts.begin(), parts.size()));
  }
  /// `keep`, when given, holds the bytes `parts` view: a record of direct_bytes or more is then
  /// written from them, never copied.
  void append(std::uint8_t kind, std::uint32_t pool, std::uint32_t call, std::uint64_t index,
              std::span<const std::string_view> parts, std::shared_ptr<const void> keep = {});
  /// Has the writer's thread write what was appended and make it durable, then tell `done`, on
  /// that thread.
  void sync_soon(synced_fn done);
  /// Writes what was appended and makes it durable, on this thread. Throws
  /// fiber::error(journal_failed) naming the file when the disk refuses: the file then ends at its
  /// last whole record, and what was appended stays for the next sync.
  void sync();
  /// Bytes appended and not yet written.
  std::size_t pending() const;
  /// The journal's size, what was appended included: where the next record begins. On the
  /// appending thread.
  std::uint64_t bytes() const noexcept { return appended_; }

 private:
  /// Records appended and not written: small ones copied together, headed; a large one as its
  /// head and the caller's bytes. Their checks are made when they are written, on the writer's
  /// thread (a third of a microsecond a small record on the loop, in perf).
  struct unwritten {
    std::string copied;
    std::array<char, 25> head{};  // [u32 size][u32 check][u8 kind][u32 pool][u32 call][u64 index]
    std::vector<std::string_view> parts;
    std::shared_ptr<const void> keep;
  };
  /// Writes what was appended at the file's end; under file_. Throws journal_failed, the file cut
  /// back to its last whole record and what was taken put back.
  void write_pending();
  std::uint64_t make_durable();  // under file_
  void run();                    // the writer's thread

  std::filesystem::path path_;
  std::uint64_t max_bytes_;
  int fd_ = -1;
  std::uint64_t appended_ = 0;  // the appending thread's: bytes()

  mutable std::mutex mutex_;  // what follows, between the appender and the thread
  std::condition_variable wake_;
  std::vector<unwritten> pending_;
  std::size_t pending_bytes_ = 0, unwoken_bytes_ = 0;
  std::vector<synced_fn> waiting_;  // sync_soon's, for the thread's next round
  bool write_wanted_ = false, failing_ = false, stopping_ = false;

  std::mutex file_;            // one writer of the file at a time: the thread, or sync()
  std::uint64_t written_ = 0;  // under file_: the file's bytes, whole records
  std::unique_ptr<XXH3_state_s, void (*)(XXH3_state_s*)> hashing_{nullptr, nullptr};  // under file_
  std::thread thread_;
};

}  // namespace fiber::detail
