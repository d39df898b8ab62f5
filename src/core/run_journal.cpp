#include "core/run_journal.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/crc.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "core/private_files.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

namespace {
constexpr std::size_t frame_bytes = 2 * sizeof(std::uint32_t);
constexpr std::size_t fixed_body = 1 + 2 * sizeof(std::uint32_t) + sizeof(std::uint64_t);
/// A record's body may not claim more than this: a size field read from a torn or foreign file
/// is not trusted with an allocation of up to 4 GiB.
constexpr std::uint32_t max_body = 256u << 20;

std::uint32_t crc_of(std::string_view bytes) {
  boost::crc_32_type crc;
  crc.process_bytes(bytes.data(), bytes.size());
  return crc.checksum();
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

std::string framed(const journal_record& r) {
  std::string body;
  body.reserve(fixed_body + r.payload.size());
  put(body, r.kind);
  put(body, r.pool);
  put(body, r.call);
  put(body, r.index);
  body.append(r.payload);
  std::string out;
  out.reserve(frame_bytes + body.size());
  put(out, static_cast<std::uint32_t>(body.size()));
  put(out, crc_of(body));
  out.append(body);
  return out;
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
    auto crc = get<std::uint32_t>(bytes.data() + at + sizeof size);
    if (size < fixed_body || size > max_body || bytes.size() - at - frame_bytes < size) break;
    std::string_view body(bytes.data() + at + frame_bytes, size);
    if (crc_of(body) != crc) break;
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

void journal_writer::append(const journal_record& r) {
  auto bytes = framed(r);
  if (bytes.size() - frame_bytes > max_body || this->bytes() + bytes.size() > max_bytes_)
    throw error(errc::journal_failed, "the run's journal " + path_.string() + " would grow past journal_max_bytes (" +
                                        std::to_string(max_bytes_) + " bytes): raise it (config key journal_max_bytes, "
                                        "FIBER_JOURNAL_MAX_BYTES) or make the results smaller");
  buffer_.append(bytes);
}

void journal_writer::sync() {
  std::size_t done = 0;
  while (done < buffer_.size()) {
    auto n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      // Back to the last whole record, the buffer kept: a later sync may succeed, and the file
      // never holds part of a record before others.
      int e = errno;
      if (::ftruncate(fd_, static_cast<off_t>(written_)) == 0) (void)::lseek(fd_, static_cast<off_t>(written_), SEEK_SET);
      throw error(errc::journal_failed, "writing the run's journal " + path_.string() + " failed: " + errno_text(e));
    }
    done += static_cast<std::size_t>(n);
  }
  written_ += done;
  buffer_.clear();
  if (done && ::fdatasync(fd_) != 0)
    throw error(errc::journal_failed, "making the run's journal " + path_.string() + " durable failed: " + errno_text(errno));
}

}  // namespace fiber::detail
