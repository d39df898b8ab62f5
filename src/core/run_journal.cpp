#include "core/run_journal.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

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
/// A record's body may not claim more than this: a size field read from a torn or foreign file
/// is not trusted with an allocation of up to 4 GiB.
constexpr std::uint32_t max_body = 256u << 20;

std::uint32_t check_of(std::string_view body) {
  // XXH3-64's low half: a torn or flipped record fails it as a CRC would, at a tenth of the cost
  // on the short records a result makes.
  return static_cast<std::uint32_t>(XXH3_64bits(body.data(), body.size()));
}

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
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
    if (size < fixed_body || size > max_body || bytes.size() - at - frame_bytes < size) break;
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
  written_ = existing.whole_bytes;
  if (::lseek(fd_, static_cast<off_t>(written_), SEEK_SET) < 0) {
    int e = errno;
    ::close(fd_);
    throw error(errc::config_error, "cannot append to the run's journal " + path.string() + ": " + errno_text(e));
  }
}

journal_writer::~journal_writer() {
  if (fd_ < 0) return;
  try {
    sync();
  } catch (...) {
    // Its owner syncs before it ends; a write failing here has nobody left to tell.
  }
  ::close(fd_);
}

void journal_writer::append(std::uint8_t kind, std::uint32_t pool, std::uint32_t call, std::uint64_t index,
                            std::span<const std::string_view> parts) {
  std::size_t body = fixed_body;
  for (auto& p : parts) body += p.size();
  std::lock_guard lock(mutex_);
  if (body > max_body || written_ + taken_ + buffer_.size() + frame_bytes + body > max_bytes_)
    throw error(errc::journal_failed, "the run's journal " + path_.string() + " would grow past journal_max_bytes (" +
                                        std::to_string(max_bytes_) + " bytes): raise it (config key journal_max_bytes, "
                                        "FIBER_JOURNAL_MAX_BYTES) or make the results smaller");
  auto at = buffer_.size();
  put(buffer_, static_cast<std::uint32_t>(body));
  put(buffer_, std::uint32_t{0});  // the check, once the body is in
  put(buffer_, kind);
  put(buffer_, pool);
  put(buffer_, call);
  put(buffer_, index);
  for (auto& p : parts) buffer_.append(p);
  auto check = check_of(std::string_view(buffer_).substr(at + frame_bytes, body));
  std::memcpy(buffer_.data() + at + sizeof(std::uint32_t), &check, sizeof check);
}

bool journal_writer::fits(std::size_t payload) const {
  std::lock_guard lock(mutex_);
  return fixed_body + payload <= max_body && written_ + taken_ + buffer_.size() + frame_bytes + fixed_body + payload <= max_bytes_;
}

std::size_t journal_writer::pending() const {
  std::lock_guard lock(mutex_);
  return buffer_.size();
}

std::uint64_t journal_writer::bytes() const {
  std::lock_guard lock(mutex_);
  return written_ + taken_ + buffer_.size();
}

void journal_writer::sync() {
  std::lock_guard one(syncing_);
  std::uint64_t from;
  {
    std::lock_guard lock(mutex_);
    writing_.swap(buffer_);
    buffer_.clear();
    from = written_;
    taken_ = writing_.size();
  }
  std::size_t done = 0;
  auto failed = [&](const std::string& what, int e) {
    // Back to the last whole record, what was taken put back before what came since: a later
    // sync may succeed, and the file never holds part of a record before others.
    if (::ftruncate(fd_, static_cast<off_t>(from)) == 0) (void)::lseek(fd_, static_cast<off_t>(from), SEEK_SET);
    std::lock_guard lock(mutex_);
    writing_.append(buffer_);
    buffer_.swap(writing_);
    writing_.clear();
    taken_ = 0;
    throw error(errc::journal_failed, what + " the run's journal " + path_.string() + " failed: " + errno_text(e));
  };
  while (done < writing_.size()) {
    auto n = ::write(fd_, writing_.data() + done, writing_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) failed("writing", errno);
    done += static_cast<std::size_t>(n);
  }
  if (done && ::fdatasync(fd_) != 0) failed("making durable", errno);
  std::lock_guard lock(mutex_);
  written_ = from + done;
  taken_ = 0;
  writing_.clear();
}

}  // namespace fiber::detail
