#include "core/run_journal.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>
#include <xxhash.h>

#include "core/private_files.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

namespace {
constexpr std::size_t frame_bytes = 2 * sizeof(std::uint32_t);
constexpr std::size_t fixed_body = 1 + 2 * sizeof(std::uint32_t) + sizeof(std::uint64_t);
static_assert(frame_bytes + fixed_body == 25, "journal_writer::unwritten::head holds a record's head");
/// A record's body may not claim more than this: a size field read from a torn or foreign file
/// is not trusted with an allocation of up to 4 GiB.
constexpr std::uint32_t max_entry_body = 256u << 20;

std::uint32_t check_of(std::string_view body) {
  // XXH3-64's low half: a torn or flipped record fails it as a CRC would, at a tenth of the cost
  // on the short records a result makes.
  return static_cast<std::uint32_t>(XXH3_64bits(body.data(), body.size()));
}

template <class T>
T get(const char* at) {
  T v;
  std::memcpy(&v, at, sizeof v);
  return v;
}

std::string errno_text(int e) { return std::error_code(e, std::generic_category()).message(); }
}  // namespace

journal_contents read_journal(const std::filesystem::path& path) {
  journal_contents out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return out;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(errc::config_error, "cannot read the run's journal " + path.string() + ": " + errno_text(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t at = 0;
  while (bytes.size() - at >= frame_bytes) {
    auto size = get<std::uint32_t>(bytes.data() + at);
    auto check = get<std::uint32_t>(bytes.data() + at + sizeof size);
    if (size < fixed_body || size > max_entry_body || bytes.size() - at - frame_bytes < size) break;
    std::string_view body(bytes.data() + at + frame_bytes, size);
    if (check_of(body) != check) break;
    journal_record r;
    r.kind = get<std::uint8_t>(body.data());
    r.pool = get<std::uint32_t>(body.data() + 1);
    r.call = get<std::uint32_t>(body.data() + 5);
    r.index = get<std::uint64_t>(body.data() + 9);
    r.payload.assign(body.substr(fixed_body));
    out.records.push_back(std::move(r));
    at += frame_bytes + size;
  }
  out.whole_bytes = at;
  out.torn = at != bytes.size();
  return out;
}

journal_writer::journal_writer(const std::filesystem::path& path, std::uint64_t max_bytes)
    : path_(path), max_bytes_(max_bytes) {
  hashing_ = std::unique_ptr<XXH3_state_s, void (*)(XXH3_state_s*)>(XXH3_createState(), [](XXH3_state_s* s) { XXH3_freeState(s); });
  if (!hashing_) throw error(errc::config_error, "no memory for the run's journal's hashing");
  std::error_code ec;
  if (path.has_parent_path()) make_private_folder(path.parent_path(), ec);
  if (ec) throw error(errc::config_error, "cannot make the folder of the run's journal " + path.string() + ": " + ec.message());
  auto existing = read_journal(path);
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd_ < 0) throw error(errc::config_error, "cannot open the run's journal " + path.string() + ": " + errno_text(errno));
  struct stat st{};
  if (::fstat(fd_, &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 077)) {
    ::close(fd_);
    throw error(errc::config_error, "the run's journal " + path.string() +
                                        " is not this user's own file, readable by it alone: remove it, or set journal_dir");
  }
  // One master at a time: a second one started with the same run id while the first still runs
  // would interleave its records with the first's.
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    ::close(fd_);
    if (e == EWOULDBLOCK)
      throw error(errc::config_error, "the run's journal " + path.string() +
                                          " is held by another master still running this run: stop that one first, or "
                                          "start a new run (another run_id)");
    throw error(errc::config_error, "cannot lock the run's journal " + path.string() + ": " + errno_text(e));
  }
  // A torn tail goes: what follows the last whole record would hide every record appended after it.
  if (existing.torn && ::ftruncate(fd_, static_cast<off_t>(existing.whole_bytes)) != 0) {
    int e = errno;
    ::close(fd_);
    throw error(errc::config_error, "cannot cut the torn tail of the run's journal " + path.string() + ": " + errno_text(e));
  }
  written_ = appended_ = existing.whole_bytes;
  thread_ = std::thread([this] { run(); });
}

journal_writer::~journal_writer() {
  if (fd_ < 0) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  try {
    sync();
  } catch (...) {
    // Its owner syncs before it ends; a write failing here has nobody left to tell.
  }
  ::close(fd_);
}

void journal_writer::append(std::uint8_t kind, std::uint32_t pool, std::uint32_t call, std::uint64_t index,
                            std::span<const std::string_view> parts, std::shared_ptr<const void> keep) {
  std::size_t body = fixed_body;
  for (auto& p : parts) body += p.size();
  if (body > max_entry_body || appended_ + frame_bytes + body > max_bytes_)
    throw error(errc::journal_failed, "the run's journal " + path_.string() + " would grow past journal_max_bytes (" +
                                        std::to_string(max_bytes_) + " bytes): raise it (config key journal_max_bytes, "
                                        "FIBER_JOURNAL_MAX_BYTES) or make the results smaller");
  // [u32 body size][u32 check][u8 kind][u32 pool][u32 call][u64 index]
  std::array<char, frame_bytes + fixed_body> head{};
  auto size = static_cast<std::uint32_t>(body);
  std::memcpy(head.data(), &size, sizeof size);
  head[frame_bytes] = static_cast<char>(kind);
  std::memcpy(head.data() + frame_bytes + 1, &pool, sizeof pool);
  std::memcpy(head.data() + frame_bytes + 5, &call, sizeof call);
  std::memcpy(head.data() + frame_bytes + 9, &index, sizeof index);
  bool referenced = keep && body >= direct_bytes;
  bool wake;
  {
    std::lock_guard lock(mutex_);
    if (referenced) {
      auto& r = pending_.emplace_back();
      r.head = head;
      r.parts.assign(parts.begin(), parts.end());
      r.keep = std::move(keep);
    } else {
      if (pending_.empty() || pending_.back().keep || pending_.back().copied.size() >= direct_bytes)
        pending_.emplace_back();
      // Its check is the writer's thread's to make, with the rest of its hashing.
      auto& out = pending_.back().copied;
      out.append(head.data(), head.size());
      for (auto& p : parts) out.append(p);
    }
    pending_bytes_ += frame_bytes + body;
    unwoken_bytes_ += frame_bytes + body;
    wake = unwoken_bytes_ >= direct_bytes && !failing_;
    if (wake) {
      unwoken_bytes_ = 0;
      write_wanted_ = true;
    }
  }
  appended_ += frame_bytes + body;
  if (wake) wake_.notify_one();
}

void journal_writer::sync_soon(synced_fn done) {
  {
    std::lock_guard lock(mutex_);
    waiting_.push_back(std::move(done));
  }
  wake_.notify_one();
}

void journal_writer::sync() {
  std::lock_guard file(file_);
  write_pending();
  (void)make_durable();
}

std::size_t journal_writer::pending() const {
  std::lock_guard lock(mutex_);
  return pending_bytes_;
}

void journal_writer::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !waiting_.empty() || write_wanted_; });
    if (stopping_) return;  // the destructor syncs what is left
    auto told = std::move(waiting_);
    waiting_.clear();
    write_wanted_ = false;
    lock.unlock();
    std::uint64_t upto = 0;
    std::exception_ptr failed;
    try {
      std::lock_guard file(file_);
      write_pending();
      if (!told.empty()) upto = make_durable();
    } catch (...) {
      failed = std::current_exception();
    }
    for (auto& f : told) f(upto, failed);
    lock.lock();
  }
}

void journal_writer::write_pending() {
  std::vector<unwritten> taken;
  {
    std::lock_guard lock(mutex_);
    taken.swap(pending_);
    pending_bytes_ = 0;
  }
  if (taken.empty()) return;
  std::vector<iovec> iov;
  std::size_t total = 0;
  auto add = [&](std::string_view b) {
    iov.push_back({const_cast<char*>(b.data()), b.size()});
    total += b.size();
  };
  for (auto& r : taken) {
    if (!r.keep) {
      for (std::size_t at = 0; at < r.copied.size();) {  // each record's check
        std::uint32_t body;
        std::memcpy(&body, r.copied.data() + at, sizeof body);
        auto check = check_of(std::string_view(r.copied).substr(at + frame_bytes, body));
        std::memcpy(r.copied.data() + at + sizeof body, &check, sizeof check);
        at += frame_bytes + body;
      }
      add(r.copied);
      continue;
    }
    auto* state = hashing_.get();
    XXH3_64bits_reset(state);
    XXH3_64bits_update(state, r.head.data() + frame_bytes, fixed_body);
    for (auto& p : r.parts) XXH3_64bits_update(state, p.data(), p.size());
    auto check = static_cast<std::uint32_t>(XXH3_64bits_digest(state));
    std::memcpy(r.head.data() + sizeof(std::uint32_t), &check, sizeof check);
    add(std::string_view(r.head.data(), r.head.size()));
    for (auto& p : r.parts) add(p);
  }
  auto from = written_;
  std::size_t done = 0, first = 0;
  constexpr std::size_t most = 1024;  // IOV_MAX on Linux
  while (done < total) {
    auto n = ::pwritev(fd_, iov.data() + first, static_cast<int>(std::min(most, iov.size() - first)),
                       static_cast<off_t>(from + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : EIO;
      // Back to the last whole record, what was taken put back before what came since: a later
      // sync may succeed, and the file never holds part of a record before others.
      (void)::ftruncate(fd_, static_cast<off_t>(from));
      {
        std::lock_guard lock(mutex_);
        for (auto& r : pending_) taken.push_back(std::move(r));
        pending_ = std::move(taken);
        pending_bytes_ += total;
        failing_ = true;
      }
      throw error(errc::journal_failed, "writing the run's journal " + path_.string() + " failed: " + errno_text(e));
    }
    done += static_cast<std::size_t>(n);
    for (auto left = static_cast<std::size_t>(n); left;) {  // past what was written
      auto take = std::min(left, iov[first].iov_len);
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + take;
      iov[first].iov_len -= take;
      left -= take;
      if (!iov[first].iov_len) ++first;
    }
  }
  written_ = from + done;
  std::lock_guard lock(mutex_);
  failing_ = false;
}

std::uint64_t journal_writer::make_durable() {
  if (::fdatasync(fd_) != 0)
    throw error(errc::journal_failed, "making the run's journal " + path_.string() + " durable failed: " + errno_text(errno));
  return written_;
}

}  // namespace fiber::detail
