#include "primitives/ring/shared_channel.hpp"

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
constexpr std::size_t segment_bytes = header_bytes + 2 * shared_channel::capacity;

void close_fd(int fd) {
  if (fd >= 0) ::close(fd);
}
}  // namespace

shared_channel::shared_channel(int segment, int own_bell, int peer_bell, bool dialer)
    : segment_(segment), own_bell_(own_bell), peer_bell_(peer_bell), dialer_(dialer) {}

std::unique_ptr<shared_channel> shared_channel::make() {
  int segment = ::memfd_create("fiber-ring-link", MFD_CLOEXEC);
  int a = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), b = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  void* base = MAP_FAILED;
  if (segment >= 0 && a >= 0 && b >= 0 && ::ftruncate(segment, segment_bytes) == 0)
    base = ::mmap(nullptr, segment_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, segment, 0);
  if (base == MAP_FAILED) {
    close_fd(segment), close_fd(a), close_fd(b);
    return nullptr;
  }
  std::unique_ptr<shared_channel> c(new shared_channel(segment, a, b, true));
  c->base_ = static_cast<char*>(base);
  new (c->base_) ring();
  new (c->base_ + sizeof(ring)) ring();
  return c;
}

std::unique_ptr<shared_channel> shared_channel::join(int segment, int dialer_bell, int acceptor_bell) {
  std::unique_ptr<shared_channel> c(new shared_channel(segment, acceptor_bell, dialer_bell, false));
  // Touching a mapping past a shorter file's end is SIGBUS: check what was passed first.
  struct stat st {};
  if (::fstat(segment, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<std::size_t>(st.st_size) < segment_bytes)
    return nullptr;
  void* base = ::mmap(nullptr, segment_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, segment, 0);
  if (base == MAP_FAILED) return nullptr;  // the destructor closes the descriptors
  c->base_ = static_cast<char*>(base);
  return c;
}

shared_channel::~shared_channel() {
  if (base_) ::munmap(base_, segment_bytes);
  close_fd(segment_), close_fd(own_bell_), close_fd(peer_bell_);
}

// The dialer writes ring 0 and reads ring 1; the acceptor the other way round.
shared_channel::ring& shared_channel::out() const noexcept {
  return *reinterpret_cast<ring*>(base_ + (dialer_ ? 0 : sizeof(ring)));
}
shared_channel::ring& shared_channel::in() const noexcept {
  return *reinterpret_cast<ring*>(base_ + (dialer_ ? sizeof(ring) : 0));
}
char* shared_channel::out_data() const noexcept { return base_ + header_bytes + (dialer_ ? 0 : capacity); }
char* shared_channel::in_data() const noexcept { return base_ + header_bytes + (dialer_ ? capacity : 0); }

void shared_channel::ring_peer() const noexcept {
  std::uint64_t one = 1;
  [[maybe_unused]] auto w = ::write(peer_bell_, &one, sizeof one);
}

std::size_t shared_channel::write_some(const char* data, std::size_t n) noexcept {
  auto& r = out();
  auto head = r.head.load(std::memory_order_relaxed);
  auto tail = r.tail.load(std::memory_order_acquire);
  // The peer writes tail: a value past head (a broken peer) must not make room that is not there.
  auto used = head - tail;
  if (used > capacity) return 0;
  n = std::min<std::size_t>(n, capacity - used);
  if (n == 0) return 0;
  auto at = static_cast<std::size_t>(head % capacity);
  auto first = std::min(n, capacity - at);
  std::memcpy(out_data() + at, data, first);
  std::memcpy(out_data(), data + first, n - first);
  // seq_cst store then load: either the reader sees the bytes or this side sees it sleeping.
  r.head.store(head + n, std::memory_order_seq_cst);
  if (r.reader_sleeps.load(std::memory_order_seq_cst)) ring_peer();
  return n;
}

std::pair<const char*, std::size_t> shared_channel::readable() const noexcept {
  auto& r = in();
  auto tail = r.tail.load(std::memory_order_relaxed);
  auto head = r.head.load(std::memory_order_acquire);
  auto at = static_cast<std::size_t>(tail % capacity);
  return {in_data() + at, std::min<std::size_t>(head - tail, capacity - at)};
}

void shared_channel::consume(std::size_t n) noexcept {
  auto& r = in();
  r.tail.store(r.tail.load(std::memory_order_relaxed) + n, std::memory_order_seq_cst);
  if (r.writer_sleeps.load(std::memory_order_seq_cst)) ring_peer();
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
  if (r.head.load(std::memory_order_relaxed) - r.tail.load(std::memory_order_seq_cst) < capacity) {
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

void shared_channel::woke() noexcept {
  out().writer_sleeps.store(0, std::memory_order_relaxed);
  in().reader_sleeps.store(0, std::memory_order_relaxed);
  std::uint64_t count;
  [[maybe_unused]] auto r = ::read(own_bell_, &count, sizeof count);
}

}  // namespace fiber::detail
