// Collectives between a ring's members over their mesh (mesh.hpp), with the schedule that suits
// the size: few steps for small messages, every link busy for large ones. Every value is reduced
// along one path and then copied, so all members end with the same bits, floating point included.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "core/flight_recorder.hpp"
#include "fiber/context.hpp"
#include "fiber/ring.hpp"
#include "primitives/ring/collective_thread.hpp"
#include "primitives/ring/mesh.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {

namespace {
/// A collective in the run's recording, from its start to its end (a member's recorder sends it to
/// the top master with its other records; about 0.2 µs, against a collective's microseconds).
class recorded_collective {
 public:
  recorded_collective(const char* what, std::size_t bytes)
      : rec_(fiber::context::default_context().runtime()->observer().recorder()), what_(what), bytes_(bytes),
        exceptions_(std::uncaught_exceptions()) {
    if (rec_.on()) start_ = rec_.now_ns();
  }
  ~recorded_collective() {
    if (!rec_.on()) return;
    bool failed = std::uncaught_exceptions() > exceptions_;
    // "": this process itself (the top master names it by its place in the tree).
    rec_.record_at(start_, record_kind::collective, rec_.name(""), 0, bytes_, rec_.now_ns() - start_,
                   failed ? std::string(what_) + " failed" : std::string(what_));
  }
  recorded_collective(const recorded_collective&) = delete;
  recorded_collective& operator=(const recorded_collective&) = delete;

 private:
  flight_recorder& rec_;
  const char* what_;
  std::size_t bytes_;
  int exceptions_;
  std::uint64_t start_ = 0;
};

/// Chunk k of `count` elements cut into n balanced chunks: [begin, end).
std::pair<std::size_t, std::size_t> chunk(std::size_t count, int n, int k) {
  return {count * static_cast<std::size_t>(k) / static_cast<std::size_t>(n),
          count * static_cast<std::size_t>(k + 1) / static_cast<std::size_t>(n)};
}
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

namespace {
/// At most this many bytes, allreduce uses recursive doubling: log2(N) steps of the whole vector
/// instead of the ring's 2(N-1) steps of 1/N of it. Steps cost more than bytes when they are few.
constexpr std::size_t small_allreduce_bytes = 16 << 10;
/// At most this many bytes, broadcast goes down a binomial tree (log2(N) steps); more goes along
/// the ring in pipelined chunks (the root sends the data once, every link carries it once).
constexpr std::size_t small_broadcast_bytes = 64 << 10;
constexpr std::size_t broadcast_chunk_bytes = 256 << 10;
/// At most this many bytes gathered in all, allgather takes Bruck's ceil(log2 N) steps; more goes
/// around the ring (N-1 steps, each link carrying each block once).
constexpr std::size_t small_allgather_bytes = 64 << 10;

/// The largest power of two at most n.
int power_of_two_floor(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

/// Recursive doubling. With N not a power of two, the members past the largest power of two P
/// first fold their data into member r - P and get the result from it at the end. Every step
/// combines (lower rank's value, higher rank's value) in that order on both sides, so all members
/// end with the same bits, floating point and non-commutative operations included.
void allreduce_by_doubling(member_mesh& mesh, int r, int n, char* data, std::size_t count, std::size_t element,
                           combine_fn combine, const void* op) {
  auto bytes = count * element;
  int p = power_of_two_floor(n), extra = n - p;
  if (r >= p) {
    mesh.exchange(r - p, data, bytes, -1, nullptr, 0, "allreduce");
    mesh.exchange(-1, nullptr, 0, r - p, data, bytes, "allreduce");
    return;
  }
  std::vector<char> theirs(bytes);
  if (r < extra) {
    mesh.exchange(-1, nullptr, 0, r + p, theirs.data(), bytes, "allreduce");
    combine(op, data, theirs.data(), count);
  }
  for (int mask = 1; mask < p; mask <<= 1) {
    int partner = r ^ mask;
    mesh.exchange(partner, data, bytes, partner, theirs.data(), bytes, "allreduce");
    if (partner > r) {
      combine(op, data, theirs.data(), count);
    } else {
      combine(op, theirs.data(), data, count);
      std::memcpy(data, theirs.data(), bytes);
    }
  }
  if (r < extra) mesh.exchange(r + p, data, bytes, -1, nullptr, 0, "allreduce");
}

/// The ring algorithm (reduce-scatter, then allgather): each member sends and receives 2(N-1)/N
/// of the data, the bandwidth-optimal schedule.
void allreduce_by_ring(member_mesh& mesh, int r, int n, char* bytes, std::size_t count, std::size_t element,
                       combine_fn combine, const void* op) {
  int right = mod(r + 1, n), left = mod(r - 1, n);
  member_mesh::reduction reduce{element, combine, op};
  for (int s = 0; s < n - 1; ++s) {  // reduce-scatter: what arrives is combined as it arrives
    auto [sb, se] = chunk(count, n, mod(r - s, n));
    auto [rb, re] = chunk(count, n, mod(r - s - 1, n));
    mesh.exchange(right, bytes + sb * element, (se - sb) * element, left, bytes + rb * element, (re - rb) * element,
                  "allreduce", &reduce);
  }
  for (int s = 0; s < n - 1; ++s) {  // allgather of the reduced chunks
    auto [sb, se] = chunk(count, n, mod(r + 1 - s, n));
    auto [rb, re] = chunk(count, n, mod(r - s, n));
    mesh.exchange(right, bytes + sb * element, (se - sb) * element, left, bytes + rb * element, (re - rb) * element,
                  "allreduce");
  }
}
}  // namespace

void ring_allreduce(const ring_member& me, void* data, std::size_t count, std::size_t element, combine_fn combine,
                    const void* op) {
  wait_for_queued(me);  // after this member's async collectives, in call order
  int n = me.size(), r = me.rank();
  if (n == 1 || count == 0) return;
  recorded_collective recorded("allreduce", count * element);
  auto& mesh = mesh_of(me);
  if (count * element <= small_allreduce_bytes)
    allreduce_by_doubling(mesh, r, n, static_cast<char*>(data), count, element, combine, op);
  else
    allreduce_by_ring(mesh, r, n, static_cast<char*>(data), count, element, combine, op);
}

void ring_broadcast(const ring_member& me, void* data, std::size_t bytes, int root) {
  wait_for_queued(me);  // after this member's async collectives, in call order
  int n = me.size(), r = me.rank();
  if (root < 0 || root >= n)
    throw error(errc::config_error, "broadcast from rank " + std::to_string(root) + " in a ring of " + std::to_string(n));
  if (n == 1 || bytes == 0) return;
  recorded_collective recorded("broadcast", bytes);
  auto& mesh = mesh_of(me);
  int pos = mod(r - root, n);  // position counted from the root
  if (bytes <= small_broadcast_bytes) {
    // Binomial tree: position v receives from v minus its lowest set bit, then sends to v + 2^k
    // for the powers of two below that bit.
    int mask = 1;
    for (; mask < n; mask <<= 1)
      if (pos & mask) {
        mesh.exchange(-1, nullptr, 0, mod(pos - mask + root, n), data, bytes, "broadcast");
        break;
      }
    for (mask >>= 1; mask > 0; mask >>= 1)
      if (pos + mask < n) mesh.exchange(mod(pos + mask + root, n), data, bytes, -1, nullptr, 0, "broadcast");
    return;
  }
  // Along the ring from the root in chunks: a member passes chunk k-1 on while it receives chunk
  // k, so every link is busy at once; the last member passes nothing on.
  int left = mod(r - 1, n), right = mod(r + 1, n);
  auto* p = static_cast<char*>(data);
  auto chunks = (bytes + broadcast_chunk_bytes - 1) / broadcast_chunk_bytes;
  auto piece = [&](std::size_t k) {
    return std::pair{p + k * broadcast_chunk_bytes, std::min(broadcast_chunk_bytes, bytes - k * broadcast_chunk_bytes)};
  };
  if (pos == 0) return mesh.exchange(right, data, bytes, -1, nullptr, 0, "broadcast");
  for (std::size_t k = 0; k <= chunks; ++k) {
    bool pass = pos != n - 1 && k > 0, take = k < chunks;
    auto [out, out_bytes] = pass ? piece(k - 1) : std::pair<char*, std::size_t>{nullptr, 0};
    auto [in, in_bytes] = take ? piece(k) : std::pair<char*, std::size_t>{nullptr, 0};
    mesh.exchange(pass ? right : -1, out, out_bytes, take ? left : -1, in, in_bytes, "broadcast");
  }
}

void ring_allgather(const ring_member& me, const void* mine, void* all, std::size_t bytes_each) {
  wait_for_queued(me);  // after this member's async collectives, in call order
  int n = me.size(), r = me.rank();
  auto* out = static_cast<char*>(all);
  std::optional<recorded_collective> recorded;
  if (n > 1 && bytes_each) recorded.emplace("allgather", bytes_each);
  if (n > 1 && bytes_each && bytes_each * static_cast<std::size_t>(n) <= small_allgather_bytes) {
    // Bruck: after the step of distance d a member holds the blocks of ranks r .. r+2d-1 (in
    // that order); it sends the ones it has to r - d and appends those of r + d. ceil(log2 N)
    // steps instead of N-1, then the blocks are put in rank order.
    auto& mesh = mesh_of(me);
    std::vector<char> held(bytes_each * static_cast<std::size_t>(n));
    std::memcpy(held.data(), mine, bytes_each);
    int have = 1;
    for (int d = 1; d < n; d <<= 1) {
      auto count = static_cast<std::size_t>(std::min(d, n - have)) * bytes_each;
      mesh.exchange(mod(r - d, n), held.data(), count, mod(r + d, n), held.data() + have * bytes_each, count,
                    "allgather");
      have += std::min(d, n - have);
    }
    for (int k = 0; k < n; ++k)
      std::memcpy(out + static_cast<std::size_t>(mod(r + k, n)) * bytes_each, held.data() + k * bytes_each, bytes_each);
    return;
  }
  if (bytes_each) std::memmove(out + static_cast<std::size_t>(r) * bytes_each, mine, bytes_each);
  if (n == 1 || bytes_each == 0) return;
  auto& mesh = mesh_of(me);
  int right = mod(r + 1, n), left = mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    auto send = static_cast<std::size_t>(mod(r - s, n)), recv = static_cast<std::size_t>(mod(r - s - 1, n));
    mesh.exchange(right, out + send * bytes_each, bytes_each, left, out + recv * bytes_each, bytes_each, "allgather");
  }
}

void ring_reduce_scatter(const ring_member& me, const void* in, void* out, std::size_t count_each, std::size_t element,
                         combine_fn combine, const void* op) {
  wait_for_queued(me);  // after this member's async collectives, in call order
  int n = me.size(), r = me.rank();
  auto block = count_each * element;
  std::optional<recorded_collective> recorded;
  if (n > 1 && block) recorded.emplace("reduce_scatter", block * static_cast<std::size_t>(n));
  if (n == 1 || block == 0) {
    if (block) std::memmove(out, in, block);
    return;
  }
  auto& mesh = mesh_of(me);
  int right = mod(r + 1, n), left = mod(r - 1, n);
  // allreduce's first half, shifted by one block so that member r ends with block r reduced.
  std::vector<char> work(static_cast<const char*>(in), static_cast<const char*>(in) + block * static_cast<std::size_t>(n));
  member_mesh::reduction reduce{element, combine, op};
  for (int s = 0; s < n - 1; ++s) {
    auto send = static_cast<std::size_t>(mod(r - s - 1, n)), recv = static_cast<std::size_t>(mod(r - s - 2, n));
    mesh.exchange(right, work.data() + send * block, block, left, work.data() + recv * block, block, "reduce_scatter",
                  &reduce);
  }
  std::memcpy(out, work.data() + static_cast<std::size_t>(r) * block, block);
}

namespace {
void check_peer(const ring_member& me, int peer, const char* what) {
  if (peer < 0 || peer >= me.size() || peer == me.rank())
    throw error(errc::config_error, std::string(what) + " with rank " + std::to_string(peer) + " from rank " +
                                        std::to_string(me.rank()) + " of a ring of " + std::to_string(me.size()) +
                                        ": name another member, 0 to size()-1");
}
}  // namespace

// Each message carries its size first, so that a receiver expecting another size says so
// instead of reading into the next message.
void ring_send(const ring_member& me, const void* data, std::size_t bytes, int peer) {
  wait_for_queued(me);  // after this member's async collectives, in call order
  check_peer(me, peer, "send");
  auto& mesh = mesh_of(me);
  std::uint64_t size = bytes;
  mesh.exchange(peer, &size, sizeof size, -1, nullptr, 0, "send");
  if (bytes) mesh.exchange(peer, data, bytes, -1, nullptr, 0, "send");
}

void ring_recv(const ring_member& me, void* data, std::size_t bytes, int peer) {
  wait_for_queued(me);  // after this member's async collectives, in call order
  check_peer(me, peer, "recv");
  auto& mesh = mesh_of(me);
  std::uint64_t size = 0;
  mesh.exchange(-1, nullptr, 0, peer, &size, sizeof size, "recv");
  if (size != bytes) {
    // Take it off the link all the same: the next message must start where it should.
    std::vector<char> skipped(static_cast<std::size_t>(size));
    if (size) mesh.exchange(-1, nullptr, 0, peer, skipped.data(), skipped.size(), "recv");
    throw error(errc::config_error, "recv of " + std::to_string(bytes) + " bytes from rank " + std::to_string(peer) +
                                        ", which sent " + std::to_string(size) + ": both sides must use the same size");
  }
  if (bytes) mesh.exchange(-1, nullptr, 0, peer, data, bytes, "recv");
}

}  // namespace fiber::detail

namespace fiber {

void ring_member::barrier() const {
  detail::wait_for_queued(*this);  // after this member's async collectives, in call order
  // Dissemination: in round k each member signals the one 2^k after it and waits for the one 2^k
  // before it; after ceil(log2 N) rounds every member has heard, through others, from all.
  int n = size_;
  if (n == 1) return;
  detail::recorded_collective recorded("barrier", 0);
  auto& mesh = detail::mesh_of(*this);
  char out = 0, in = 0;
  for (int d = 1; d < n; d <<= 1)
    mesh.exchange((rank_ + d) % n, &out, 1, (rank_ - d % n + n) % n, &in, 1, "barrier");
}

}  // namespace fiber
