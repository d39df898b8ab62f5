// Collectives between a ring's members over their mesh (mesh.hpp). allreduce is the ring
// algorithm (reduce-scatter, then allgather: each member sends and receives 2(N-1)/N of the data,
// the bandwidth-optimal schedule); every chunk is reduced along one path and then copied, so all
// members end with the same bits, floating point included.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fiber/ring.hpp"
#include "primitives/ring/collective_thread.hpp"
#include "primitives/ring/mesh.hpp"

namespace fiber::detail {

namespace {
/// Chunk k of `count` elements cut into n balanced chunks: [begin, end).
std::pair<std::size_t, std::size_t> chunk(std::size_t count, int n, int k) {
  return {count * static_cast<std::size_t>(k) / static_cast<std::size_t>(n),
          count * static_cast<std::size_t>(k + 1) / static_cast<std::size_t>(n)};
}
int mod(int a, int n) { return ((a % n) + n) % n; }
}  // namespace

void ring_allreduce(const ring_member& me, void* data, std::size_t count, std::size_t element, combine_fn combine,
                    const void* op) {
  wait_for_queued(me);  // after this member's async collectives, in call order
  int n = me.size(), r = me.rank();
  if (n == 1 || count == 0) return;
  auto& mesh = mesh_of(me);
  int right = mod(r + 1, n), left = mod(r - 1, n);
  auto* bytes = static_cast<char*>(data);
  std::vector<char> incoming((count / static_cast<std::size_t>(n) + 1) * element);
  for (int s = 0; s < n - 1; ++s) {  // reduce-scatter
    auto [sb, se] = chunk(count, n, mod(r - s, n));
    auto [rb, re] = chunk(count, n, mod(r - s - 1, n));
    mesh.exchange(right, bytes + sb * element, (se - sb) * element, left, incoming.data(), (re - rb) * element, "allreduce");
    combine(op, bytes + rb * element, incoming.data(), re - rb);
  }
  for (int s = 0; s < n - 1; ++s) {  // allgather of the reduced chunks
    auto [sb, se] = chunk(count, n, mod(r + 1 - s, n));
    auto [rb, re] = chunk(count, n, mod(r - s, n));
    mesh.exchange(right, bytes + sb * element, (se - sb) * element, left, bytes + rb * element, (re - rb) * element,
                  "allreduce");
  }
}

void ring_broadcast(const ring_member& me, void* data, std::size_t bytes, int root) {
  wait_for_queued(me);  // after this member's async collectives, in call order
  int n = me.size(), r = me.rank();
  if (root < 0 || root >= n)
    throw error(errc::config_error, "broadcast from rank " + std::to_string(root) + " in a ring of " + std::to_string(n));
  if (n == 1 || bytes == 0) return;
  auto& mesh = mesh_of(me);
  // Along the ring from the root: each member receives from its left and passes on to its right
  // (the last one does not), so the root sends the data once.
  int pos = mod(r - root, n);
  int left = mod(r - 1, n), right = mod(r + 1, n);
  if (pos != 0) mesh.exchange(-1, nullptr, 0, left, data, bytes, "broadcast");
  if (pos != n - 1) mesh.exchange(right, data, bytes, -1, nullptr, 0, "broadcast");
}

void ring_allgather(const ring_member& me, const void* mine, void* all, std::size_t bytes_each) {
  wait_for_queued(me);  // after this member's async collectives, in call order
  int n = me.size(), r = me.rank();
  auto* out = static_cast<char*>(all);
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
  if (n == 1 || block == 0) {
    if (block) std::memmove(out, in, block);
    return;
  }
  auto& mesh = mesh_of(me);
  int right = mod(r + 1, n), left = mod(r - 1, n);
  // allreduce's first half, shifted by one block so that member r ends with block r reduced.
  std::vector<char> work(static_cast<const char*>(in), static_cast<const char*>(in) + block * static_cast<std::size_t>(n));
  std::vector<char> incoming(block);
  for (int s = 0; s < n - 1; ++s) {
    auto send = static_cast<std::size_t>(mod(r - s - 1, n)), recv = static_cast<std::size_t>(mod(r - s - 2, n));
    mesh.exchange(right, work.data() + send * block, block, left, incoming.data(), block, "reduce_scatter");
    combine(op, work.data() + recv * block, incoming.data(), count_each);
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
  // One byte around the ring twice: no member leaves before every member has arrived.
  int n = size_;
  if (n == 1) return;
  auto& mesh = detail::mesh_of(*this);
  int right = (rank_ + 1) % n, left = (rank_ + n - 1) % n;
  char token = 0;
  for (int round = 0; round < 2; ++round) {
    if (rank_ == 0) {
      mesh.exchange(right, &token, 1, -1, nullptr, 0, "barrier");
      mesh.exchange(-1, nullptr, 0, left, &token, 1, "barrier");
    } else {
      mesh.exchange(-1, nullptr, 0, left, &token, 1, "barrier");
      mesh.exchange(right, &token, 1, -1, nullptr, 0, "barrier");
    }
  }
}

}  // namespace fiber
