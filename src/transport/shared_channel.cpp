#include "transport/shared_channel.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

namespace fiber::detail {

// One direction. Positions count every byte ever written or read, so full and empty differ
// without a spare slot; each field has a cache line of its own (the two sides write different
// ones).
struct shared_channel::ring {
  alignas(64) std::atomic<std::uint64_t> head{0};  // written by the producer
  alignas(64) std::atomic<std::uint64_t> tail{0};  // written by the consumer
  alignas(64) std::atomic<std::uint32_t> reader_sleeps{0};
  alignas(64) std::atomic<std::uint32_t> writer_sleeps{0};
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shared memory needs lock-free atomics");

namespace {
constexpr std::size_t header_bytes = 4096;  // two rings' counters, page aligned data after
constexpr std::size_t segment_bytes(std::size_t capacity) { return header_bytes + 2 * capacity; }
// No one may resize the segment once it is passed, nor take the seals off.
constexpr int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

void close_fd(int fd) {
  if (fd >= 0) ::close(fd);
}
}  // namespace

shared_channel::shared_channel(int segment, int own_bell, int peer_bell, bool dialer, std::size_t capacity)
    : segment_(segment), own_bell_(own_bell), peer_bell_(peer_bell), dialer_(dialer), capacity_(capacity) {}

std::unique_ptr<shared_channel> shared_channel::make(std::size_t capacity, bool populate) {
  if (capacity < min_capacity || capacity > max_capacity) return nullptr;
  int segment = ::memfd_create("fiber-shared-link", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  int a = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), b = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  void* base = MAP_FAILED;
  if (segment >= 0 && a >= 0 && b >= 0 && ::ftruncate(segment, static_cast<off_t>(segment_bytes(capacity))) == 0 &&
      ::fcntl(segment, F_ADD_SEALS, seals) == 0)
    base = ::mmap(nullptr, segment_bytes(capacity), PROT_READ | PROT_WRITE, MAP_SHARED | (populate ? MAP_POPULATE : 0),
                  segment, 0);
  if (base == MAP_FAILED) {
    close_fd(segment), close_fd(a), close_fd(b);
    return nullptr;
  }
  std::unique_ptr<shared_channel> c(new shared_channel(segment, a, b, true, capacity));
  c->base_ = static_cast<char*>(base);
  new (c->base_) ring();
  new (c->base_ + sizeof(ring)) ring();
  return c;
}

std::unique_ptr<shared_channel> shared_channel::join(int segment, int dialer_bell, int acceptor_bell, bool populate) {
  std::unique_ptr<shared_channel> c(new shared_channel(segment, acceptor_bell, dialer_bell, false, 0));
  // Touching a mapping past a shorter file's end is SIGBUS: check what was passed first, and that
  // no one can shrink it later.
  struct stat st {};
  if (::fstat(segment, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < static_cast<off_t>(header_bytes)) return nullptr;
  auto size = static_cast<std::size_t>(st.st_size);
  auto capacity = (size - header_bytes) / 2;
  if (size != segment_bytes(capacity) || capacity < min_capacity || capacity > max_capacity) return nullptr;
  int sealed = ::fcntl(segment, F_GET_SEALS);
  if (sealed < 0 || (sealed & seals) != seals) return nullptr;
  c->capacity_ = capacity;
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | (populate ? MAP_POPULATE : 0), segment, 0);
  if (base == MAP_FAILED) return nullptr;  // the destructor closes the descriptors
  c->base_ = static_cast<char*>(base);
  return c;
}

shared_channel::~shared_channel() {
  if (base_) ::munmap(base_, segment_bytes(capacity_));
  close_fd(segment_), close_fd(own_bell_), close_fd(peer_bell_);
}

// The dialer writes ring 0 and reads ring 1; the acceptor the other way round.
shared_channel::ring& shared_channel::out() const noexcept {
  return *reinterpret_cast<ring*>(base_ + (dialer_ ? 0 : sizeof(ring)));
}
shared_channel::ring& shared_channel::in() const noexcept {
  return *reinterpret_cast<ring*>(base_ + (dialer_ ? sizeof(ring) : 0));
}
char* shared_channel::out_data() const noexcept { return base_ + header_bytes + (dialer_ ? 0 : capacity_); }
char* shared_channel::in_data() const noexcept { return base_ + header_bytes + (dialer_ ? capacity_ : 0); }

void shared_channel::ring_peer() const noexcept {
  rings_.fetch_add(1, std::memory_order_relaxed);
  std::uint64_t one = 1;
  [[maybe_unused]] auto w = ::write(peer_bell_, &one, sizeof one);
}

std::size_t shared_channel::write_some(const char* data, std::size_t n) noexcept {
  iovec piece{const_cast<char*>(data), n};
  return write_some(&piece, 1);
}

std::size_t shared_channel::write_some(const iovec* pieces, std::size_t count) noexcept {
  auto& r = out();
  auto head = r.head.load(std::memory_order_relaxed);
  auto tail = r.tail.load(std::memory_order_acquire);
  // The peer writes tail: a value past head (a broken peer) must not make room that is not there.
  auto used = head - tail;
  if (used > capacity_) return 0;
  std::size_t room = capacity_ - used, moved = 0;
  for (std::size_t i = 0; i < count && moved < room; ++i) {
    auto n = std::min<std::size_t>(pieces[i].iov_len, room - moved);
    auto data = static_cast<const char*>(pieces[i].iov_base);
    auto at = static_cast<std::size_t>((head + moved) % capacity_);
    auto first = std::min(n, capacity_ - at);
    std::memcpy(out_data() + at, data, first);
    std::memcpy(out_data(), data + first, n - first);
    moved += n;
  }
  if (moved == 0) return 0;
  // seq_cst store then load: either the reader sees the bytes or this side sees it sleeping.
  r.head.store(head + moved, std::memory_order_seq_cst);
  // Taken back as it is rung: one ring wakes the reader, the writes after it need none.
  if (r.reader_sleeps.load(std::memory_order_seq_cst) && r.reader_sleeps.exchange(0, std::memory_order_seq_cst)) ring_peer();
  return moved;
}

std::pair<const char*, std::size_t> shared_channel::readable() const noexcept {
  auto& r = in();
  auto tail = r.tail.load(std::memory_order_relaxed);
  auto head = r.head.load(std::memory_order_acquire);
  auto at = static_cast<std::size_t>(tail % capacity_);
  // A broken peer's head behind the tail reads as a full ring, never past the ring's end.
  return {in_data() + at, std::min<std::size_t>(head - tail, capacity_ - at)};
}

void shared_channel::consume(std::size_t n) noexcept {
  auto& r = in();
  r.tail.store(r.tail.load(std::memory_order_relaxed) + n, std::memory_order_seq_cst);
  if (r.writer_sleeps.load(std::memory_order_seq_cst) && r.writer_sleeps.exchange(0, std::memory_order_seq_cst)) ring_peer();
}

std::size_t shared_channel::read_some(char* data, std::size_t n) noexcept {
  std::size_t moved = 0;
  while (moved < n) {  // up to the ring's end, then from its start
    auto [from, ready] = readable();
    auto take = std::min(ready, n - moved);
    if (take == 0) break;
    std::memcpy(data + moved, from, take);
    consume(take);
    moved += take;
  }
  return moved;
}

bool shared_channel::sleep_for_write() noexcept {
  auto& r = out();
  r.writer_sleeps.store(1, std::memory_order_seq_cst);
  if (r.head.load(std::memory_order_relaxed) - r.tail.load(std::memory_order_seq_cst) < capacity_) {
    r.writer_sleeps.store(0, std::memory_order_relaxed);
    return false;
  }
  return true;
}

bool shared_channel::sleep_for_read() noexcept {
  auto& r = in();
  r.reader_sleeps.store(1, std::memory_order_seq_cst);
  if (r.head.load(std::memory_order_seq_cst) != r.tail.load(std::memory_order_relaxed)) {
    r.reader_sleeps.store(0, std::memory_order_relaxed);
    return false;
  }
  return true;
}

bool shared_channel::can_write() const noexcept {
  auto& r = out();
  return r.head.load(std::memory_order_relaxed) - r.tail.load(std::memory_order_acquire) < capacity_;
}

bool shared_channel::peer_sleeps_for_read() const noexcept {
  return out().reader_sleeps.load(std::memory_order_seq_cst) != 0;
}

void shared_channel::stay_awake() noexcept {
  out().writer_sleeps.store(0, std::memory_order_relaxed);
  in().reader_sleeps.store(0, std::memory_order_relaxed);
}

void shared_channel::woke() noexcept {
  out().writer_sleeps.store(0, std::memory_order_relaxed);
  in().reader_sleeps.store(0, std::memory_order_relaxed);
  std::uint64_t count;
  [[maybe_unused]] auto r = ::read(own_bell_, &count, sizeof count);
}

}  // namespace fiber::detail
