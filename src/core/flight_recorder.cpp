#include "core/flight_recorder.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>
#include <system_error>

#include "core/log.hpp"
#include "core/private_files.hpp"
#include "core/recording_folder.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

namespace fs = std::filesystem;

std::string record_folder(const fiber::config& cfg) {
  if (!cfg.record_dir.empty()) return cfg.record_dir;
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state) return std::string(state) + "/fiber/runs";
  return home_folder(".local/state/fiber/runs", "record_dir");
}

std::string exit_text(std::int64_t code) {
  return code < 0 ? "signal " + std::to_string(-code) : "exit code " + std::to_string(code);
}

std::string resources_text(std::uint64_t cpus, std::uint64_t d, std::string_view placement) {
  auto out = "cpu " + std::to_string(cpus);
  if (auto mb = memory_mb_of(d)) out += ", " + std::to_string(mb) + " MB";
  if (auto gpus = gpus_of(d)) out += ", " + std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs");
  if (!placement.empty()) out += "; " + std::string(placement);
  return out;
}

std::string program_name() {
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("?") : exe.filename().string();
}

namespace {
std::string utc_stamp(std::chrono::system_clock::time_point t) {
  auto secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

// A child the program forks (without exec) shares the recording's file: what it would write at
// its exit (its copy of the buffer, and a run_end) is not the run's.
bool forked_away = false;
void note_fork() { forked_away = true; }

}  // namespace

void flight_recorder::open(const fiber::config& cfg, const std::string& run_id) {
  if (!cfg.record) return;
  static const int watch_forks = ::pthread_atfork(nullptr, nullptr, note_fork);
  (void)watch_forks;
  auto now = std::chrono::system_clock::now();
  fs::path folder;
  try {
    folder = record_folder(cfg);
  } catch (const error& e) {
    logf(log_level::warn, "this run is not recorded: ", e.reason(), " (record=false turns the recorder off)");
    return;
  }
  std::error_code ec;
  make_private_folder(folder, ec);
  auto program = program_name();
  path_ = (folder / recording_file_name(utc_stamp(now), run_id, program)).string();
  fd_ = open_private_file(path_, false);
  if (fd_ < 0) {
    logf(log_level::warn, "cannot record this run in ", path_, ": ", std::strerror(errno),
         " (record_dir sets the folder; record=false turns the recorder off)");
    path_.clear();
    return;
  }
  max_bytes_ = cfg.record_max_bytes;
  began_ = std::chrono::steady_clock::now();
  buffer_.reserve(64 << 10);
  buffer_.insert(buffer_.end(), std::begin(flight_magic), std::end(flight_magic));
  auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  record(record_kind::run_begin, static_cast<std::uint32_t>(::getpid()), static_cast<std::uint64_t>(wall), 0, 0,
         program + "\t" + cfg.backend);
  // This run's file, named, counts among its program's.
  keep_newest(folder, std::max(1, cfg.record_keep));
}

void flight_recorder::open_relay(const fiber::config& cfg, relay_fn sink) {
  if (!cfg.record) return;
  relay_ = std::move(sink);
  began_ = std::chrono::steady_clock::now();
  buffer_.reserve(64 << 10);
}

std::uint64_t flight_recorder::now_ns() const {
  return static_cast<std::uint64_t>((std::chrono::steady_clock::now() - began_).count());
}

void flight_recorder::record(record_kind kind, std::uint32_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d,
                             std::string_view text) {
  if (!on() || forked_away) return;
  record_at(now_ns(), kind, a, b, c, d, text);
}

void flight_recorder::record_at(std::uint64_t ns, record_kind kind, std::uint32_t a, std::uint64_t b, std::uint64_t c,
                                std::uint64_t d, std::string_view text) {
  if (!on() || forked_away) return;
  std::lock_guard lock(mutex_);
  if (!on() || truncated_) return;
  flight_record r{.ns = ns,
                  .kind = kind,
                  .a = a,
                  .b = b,
                  .c = c,
                  .d = d};
  append(r, text);
  // The rare events go to the file at once: a run that is killed loses only its last tasks.
  if (kind == record_kind::worker_down || kind == record_kind::pool_end || kind == record_kind::run_begin ||
      buffer_.size() >= (60 << 10))
    write_out();
}

std::uint32_t flight_recorder::name(std::string_view n) {
  if (!on()) return 0;
  std::lock_guard lock(mutex_);
  auto [it, added] = names_.try_emplace(std::string(n), static_cast<std::uint32_t>(names_.size() + 1));
  if (added && !truncated_) {
    flight_record r{.ns = static_cast<std::uint64_t>((std::chrono::steady_clock::now() - began_).count()),
                    .kind = record_kind::name,
                    .a = it->second};
    append(r, n);
  }
  return it->second;
}

void flight_recorder::append(const flight_record& given, std::string_view text) {
  auto r = given;
  r.text_size = static_cast<std::uint16_t>(std::min<std::size_t>(text.size(), 0xffff));
  auto size = sizeof r + r.text_size;
  if (max_bytes_ && written_ + buffer_.size() + size + sizeof r > max_bytes_) {
    // Room is kept for this record: readers see where the recording stopped, and why.
    flight_record cut{.ns = r.ns, .kind = record_kind::truncated};
    auto* p = reinterpret_cast<const char*>(&cut);
    buffer_.insert(buffer_.end(), p, p + sizeof cut);
    truncated_ = true;
    return;
  }
  auto* p = reinterpret_cast<const char*>(&r);
  buffer_.insert(buffer_.end(), p, p + sizeof r);
  buffer_.insert(buffer_.end(), text.data(), text.data() + r.text_size);
}

void flight_recorder::write_out() {
  if (relay_) {
    if (!buffer_.empty()) relay_(std::string_view(buffer_.data(), buffer_.size()), now_ns());
    buffer_.clear();
    return;
  }
  std::size_t at = 0;
  while (at < buffer_.size()) {
    auto n = ::write(fd_, buffer_.data() + at, buffer_.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      logf(log_level::warn, "the flight recorder stopped: cannot write ", path_, ": ", std::strerror(errno));
      truncated_ = true;
      break;
    }
    at += static_cast<std::size_t>(n);
  }
  written_ += at;
  buffer_.clear();
}

void flight_recorder::flush() {
  if (!on() || forked_away) return;
  std::lock_guard lock(mutex_);
  if (on()) write_out();
}

void flight_recorder::close() {
  if (relay_) {
    flush();
    std::lock_guard lock(mutex_);
    relay_ = nullptr;
    return;
  }
  if (fd_ < 0) return;
  if (forked_away) {
    ::close(fd_);
    fd_ = -1;
    return;
  }
  record(record_kind::run_end);
  std::lock_guard lock(mutex_);
  write_out();
  ::close(fd_);
  fd_ = -1;
}

std::vector<read_record> read_flight_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(errc::malformed_message, "cannot read the recorded run " + path + ": " + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < sizeof flight_magic || std::memcmp(bytes.data(), flight_magic, sizeof flight_magic) != 0)
    throw error(errc::malformed_message, path + " is not a fiber recording (it does not begin with FIBERREC)");
  std::vector<read_record> out;
  std::size_t at = sizeof flight_magic;
  while (at + sizeof(flight_record) <= bytes.size()) {
    read_record x;
    std::memcpy(&x.r, bytes.data() + at, sizeof x.r);
    at += sizeof x.r;
    if (at + x.r.text_size > bytes.size()) break;  // cut short while writing
    x.text.assign(bytes.data() + at, x.r.text_size);
    at += x.r.text_size;
    out.push_back(std::move(x));
  }
  return out;
}

}  // namespace fiber::detail
