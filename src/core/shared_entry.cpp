#include "fiber/detail/shared_entry.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <system_error>
#include <unordered_map>

#include "core/demangle.hpp"
#include "core/log.hpp"
#include "fiber/shared.hpp"

namespace fiber::detail {
namespace {

std::uint64_t new_id() {
  // Ids need only be unique among the objects one worker may be sent; a random start keeps two
  // masters' ids apart as well.
  static const std::uint64_t base = [] {
    std::random_device rd;
    return (std::uint64_t(rd()) << 32) ^ rd();
  }();
  static std::atomic<std::uint64_t> next{0};
  return base + next.fetch_add(1, std::memory_order_relaxed);
}

struct table {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, std::shared_ptr<const shared_entry>> held;  // received, until released
  std::unordered_map<std::uint64_t, std::weak_ptr<const shared_entry>> own;      // made here (found by id too)
  std::uint64_t published = 0;                                                    // bytes, publish_shared
};
table& the_table() {
  static table* t = new table;  // never destroyed: entries may outlive static destruction
  return *t;
}

constexpr std::size_t host_align = 64;
std::size_t aligned(std::size_t n) { return (n + host_align - 1) / host_align * host_align; }

[[noreturn]] void throw_errno(const std::string& what) {
  throw error(errc::spawn_failed, what + ": " + std::strerror(errno));
}

}  // namespace

std::uint64_t type_fingerprint(const std::type_info& t) noexcept {
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a
  for (const char* p = t.name(); *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
  return h;
}

shared_entry::shared_entry(std::shared_ptr<const void> value, const std::type_info& type, writer&& encoded)
    : id_(new_id()), type_(type_fingerprint(type)), head_(std::move(encoded.head())), made_here_(true), value_(std::move(value)) {
  auto frames = std::make_shared<std::vector<blob>>(std::move(encoded.blobs()));  // each keeps its bytes alive
  for (auto& b : *frames) blobs_.emplace_back(b.data, b.size);
  keep_ = std::move(frames);
}

shared_entry::shared_entry(std::uint64_t id, std::uint64_t type, std::string head,
                           std::vector<std::span<const std::byte>> blobs, std::shared_ptr<const void> keep)
    : id_(id), type_(type), head_(std::move(head)), blobs_(std::move(blobs)), keep_(std::move(keep)) {}

shared_entry::~shared_entry() {
  if (made_here_) {
    auto& t = the_table();
    std::lock_guard lock(t.mutex);
    t.own.erase(id_);
    if (published_) t.published -= bytes();
  }
  if (host_fd_ >= 0) ::close(host_fd_);
  for (auto& f : on_release_) {
    try {
      f(id_);
    } catch (const std::exception& e) {
      logf(log_level::warn, "releasing shared object ", id_, ": ", e.what());
    }
  }
}

std::size_t shared_entry::bytes() const noexcept {
  std::size_t n = head_.size();
  for (auto& b : blobs_) n += b.size();
  return n;
}

void shared_entry::on_release(std::function<void(std::uint64_t)> f) const {
  std::lock_guard lock(mutex_);
  on_release_.push_back(std::move(f));
}

std::vector<std::size_t> shared_entry::host_layout(std::size_t head, std::span<const std::size_t> blobs) {
  std::vector<std::size_t> at;
  at.reserve(blobs.size() + 2);
  at.push_back(0);
  std::size_t end = head;
  for (auto b : blobs) {
    at.push_back(aligned(end));
    end = at.back() + b;
  }
  at.push_back(end);  // the whole copy's size
  return at;
}

int shared_entry::host_copy() const {
  std::lock_guard lock(mutex_);
  if (host_fd_ >= 0) return host_fd_;
  std::vector<std::size_t> sizes;
  sizes.reserve(blobs_.size());
  for (auto& b : blobs_) sizes.push_back(b.size());
  auto at = host_layout(head_.size(), sizes);
  int fd = ::memfd_create("fiber-shared", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) throw_errno("cannot make shared memory for a shared object (memfd_create)");
  auto fail = [&](const char* what) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    throw_errno(std::string("cannot fill the shared memory of a shared object (") + what + ")");
  };
  if (::ftruncate(fd, static_cast<off_t>(at.back())) != 0) fail("ftruncate");
  auto put = [&](const std::byte* p, std::size_t n, std::size_t off) {
    while (n) {
      auto w = ::pwrite(fd, p, n, static_cast<off_t>(off));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("pwrite");
      p += w, n -= static_cast<std::size_t>(w), off += static_cast<std::size_t>(w);
    }
  };
  put(reinterpret_cast<const std::byte*>(head_.data()), head_.size(), 0);
  for (std::size_t i = 0; i < blobs_.size(); ++i) put(blobs_[i].data(), blobs_[i].size(), at[i + 1]);
  // Read-only for good: a worker that maps it can trust it stays as it was shared.
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) fail("seal");
  host_fd_ = fd;
  return fd;
}

std::shared_ptr<const shared_entry> map_host_copy(int pid, int fd, std::uint64_t id, std::uint64_t type,
                                                  std::size_t head, std::span<const std::size_t> blobs) {
  auto at = shared_entry::host_layout(head, blobs);
  auto path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  auto why = [&](const char* what) {
    return error(errc::malformed_message, "cannot map shared object " + std::to_string(id) + " from the master's memory (" +
                                              path + ", " + what + "): " + std::strerror(errno));
  };
  int local = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (local < 0) throw why("open");
  struct stat st {};
  if (::fstat(local, &st) != 0 || static_cast<std::size_t>(st.st_size) != at.back()) {
    ::close(local);
    throw error(errc::malformed_message, "shared object " + std::to_string(id) + ": " + path +
                                             " is not the master's copy (its size differs)");
  }
  void* p = at.back() ? ::mmap(nullptr, at.back(), PROT_READ, MAP_SHARED, local, 0) : nullptr;
  ::close(local);
  if (p == MAP_FAILED) throw why("mmap");
  auto size = at.back();
  std::shared_ptr<const void> mapping(p, [size](const void* q) {
    if (q) ::munmap(const_cast<void*>(q), size);
  });
  auto* base = static_cast<const std::byte*>(p);
  std::vector<std::span<const std::byte>> spans;
  for (std::size_t i = 0; i < blobs.size(); ++i) spans.emplace_back(base + at[i + 1], blobs[i]);
  std::string head_bytes(reinterpret_cast<const char*>(base), head);
  return std::make_shared<const shared_entry>(id, type, std::move(head_bytes), std::move(spans), std::move(mapping));
}

void hold_shared(std::shared_ptr<const shared_entry> e) {
  auto& t = the_table();
  std::lock_guard lock(t.mutex);
  auto id = e->id();
  t.held[id] = std::move(e);
}

void release_shared(std::uint64_t id) noexcept {
  std::shared_ptr<const shared_entry> gone;  // destroyed outside the lock
  auto& t = the_table();
  std::lock_guard lock(t.mutex);
  if (auto it = t.held.find(id); it != t.held.end()) {
    gone = std::move(it->second);
    t.held.erase(it);
  }
}

std::shared_ptr<const shared_entry> find_shared(std::uint64_t id) {
  auto& t = the_table();
  std::lock_guard lock(t.mutex);
  if (auto it = t.held.find(id); it != t.held.end()) return it->second;
  if (auto it = t.own.find(id); it != t.own.end()) return it->second.lock();
  return nullptr;
}

std::shared_ptr<const shared_entry> make_shared_entry(std::shared_ptr<const void> value, const std::type_info& type,
                                                      writer&& encoded) {
  auto e = std::make_shared<const shared_entry>(std::move(value), type, std::move(encoded));
  auto& t = the_table();
  std::lock_guard lock(t.mutex);
  t.own[e->id()] = e;
  return e;
}

void publish_shared(const shared_entry& e, std::uint64_t bound) {
  if (!e.made_here_) return;  // a worker passing on what it received: its master counted it
  auto& t = the_table();
  std::lock_guard lock(t.mutex);
  if (e.published_) return;
  if (bound == 0) bound = std::uint64_t(::sysconf(_SC_PHYS_PAGES)) * std::uint64_t(::sysconf(_SC_PAGE_SIZE)) / 4;
  auto n = e.bytes();
  if (n > bound || t.published > bound - n)
    throw error(errc::shared_cache_full,
                "fiber::shared object of " + std::to_string(n) + " bytes: with the " + std::to_string(t.published) +
                    " bytes of shared objects already in use, the workers would hold more than shared_cache_bytes (" +
                    std::to_string(bound) + "); let go of handles no longer needed, or raise shared_cache_bytes (FIBER_SHARED_CACHE_BYTES)");
  t.published += n;
  e.published_ = true;
}

std::uint64_t shared_published_bytes() noexcept {
  auto& t = the_table();
  std::lock_guard lock(t.mutex);
  return t.published;
}

std::size_t shared_held() noexcept {
  auto& t = the_table();
  std::lock_guard lock(t.mutex);
  return t.held.size();
}

std::span<const std::byte> shared_range(std::uint64_t id, std::size_t n) {
  auto e = find_shared(id);
  if (!e)
    throw error(errc::malformed_message, "a range sent apart as shared object " + std::to_string(id) +
                                             " was referred to but never sent to this process (sender and receiver disagree)");
  if (e->type() != type_fingerprint(typeid(shared_range_tag))) throw_shared_type_mismatch(id, typeid(shared_range_tag));
  // The span stays valid after `e` goes here: this process holds the entry until its master
  // releases it, which is after every chunk that refers to it has been answered.
  reader r(e->head(), e->blobs());
  auto bytes = r.range();
  if (bytes.size() != n || !r.at_end()) throw_malformed("range sent apart", n, bytes.size());
  return bytes;
}

void throw_shared_type_mismatch(std::uint64_t id, const std::type_info& wanted) {
  throw error(errc::malformed_message, "shared object " + std::to_string(id) + " is read as fiber::shared<" +
                                           demangle(wanted.name()) + "> but was shared with another type");
}

void write_shared_inline(writer& w, const shared_entry& e) {
  auto head = e.head();
  w.size(head.size());
  w.bytes(head.data(), head.size());
  w.size(e.blobs().size());
  w.with_owner(e.keep(), [&] {
    for (auto& b : e.blobs()) w.range(b.data(), b.size());
  });
}

std::shared_ptr<const shared_entry> read_shared_inline(reader& r, std::uint64_t id, std::uint64_t type) {
  std::string head(r.size(), '\0');
  r.bytes(head.data(), head.size());
  auto n = r.size();
  std::vector<std::span<const std::byte>> read;
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    read.push_back(r.range());
    total = aligned(total) + read.back().size();
  }
  // The message's frames go when it is read: the entry keeps copies of its large ranges.
  auto copy = std::make_shared<std::vector<std::byte>>(total);
  std::vector<std::span<const std::byte>> spans;
  std::size_t at = 0;
  for (auto& s : read) {
    at = aligned(at);
    if (!s.empty()) std::memcpy(copy->data() + at, s.data(), s.size());
    spans.emplace_back(copy->data() + at, s.size());
    at += s.size();
  }
  return std::make_shared<const shared_entry>(id, type, std::move(head), std::move(spans), std::move(copy));
}

}  // namespace fiber::detail
