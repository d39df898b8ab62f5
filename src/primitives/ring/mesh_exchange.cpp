// member_mesh::exchange: one send and one receive at once over a ring's links, in steps. Each
// turn moves what the links take without blocking; a turn where nothing moved first checks that
// the peers are still there, then looks at shared memory a little longer, then sleeps on the
// links' descriptors (taking hellos meanwhile) until one is ready.
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "primitives/ring/mesh.hpp"

namespace fiber::detail {

namespace {
// How long a side with nothing to do keeps looking before it sleeps: a peer answers a small
// message within a few microseconds, and a sleep and its wake-up cost about 25 here. It looks
// between sched_yield()s, so that members outnumbering the cores let the peer they wait for run
// (pure spinning made small collectives 5× slower with 4 members on 2 cores).
constexpr auto look_for = std::chrono::microseconds(30);
}  // namespace

namespace {
/// Combines what `link` holds into `into` (in_bytes in all, `got` of them done), element by
/// element, from the ring where it is aligned for the element type; an element cut by the
/// ring's end, or bytes placed at an odd address, go through `carry` first. Returns the bytes
/// taken.
std::size_t combine_some(shared_channel& link, const member_mesh::reduction& r, char* into, std::size_t in_bytes,
                         std::size_t& got, std::vector<char>& carry, std::size_t& carried) {
  // alignof(T) divides sizeof(T): the largest power of two dividing the size is enough.
  auto align = std::min<std::size_t>(r.element & (~r.element + 1), 64);
  std::size_t taken = 0;
  for (;;) {
    auto [from, ready] = link.readable();
    ready = std::min(ready, in_bytes - got - carried);
    if (ready == 0) return taken;
    auto whole = ready / r.element * r.element;
    if (carried == 0 && whole && reinterpret_cast<std::uintptr_t>(from) % align == 0) {
      r.combine(r.op, into + got, from, whole / r.element);
      got += whole;
      link.consume(whole);
      taken += whole;
      continue;
    }
    auto take = std::min(ready, carry.size() - carried);
    std::memcpy(carry.data() + carried, from, take);
    link.consume(take);
    carried += take;
    taken += take;
    auto ready_whole = carried / r.element * r.element;
    if (ready_whole) {
      r.combine(r.op, into + got, carry.data(), ready_whole / r.element);
      got += ready_whole;
      std::memmove(carry.data(), carry.data() + ready_whole, carried - ready_whole);
      carried -= ready_whole;
    }
  }
}
}  // namespace

struct member_mesh::exchange_run {
  member_mesh& mesh;
  int to, from;
  const char* out;
  char* in;
  std::size_t out_bytes, in_bytes;
  const char* during;
  const reduction* reduce;
  peer_link* out_link;
  peer_link* in_link;
  std::size_t sent = 0, got = 0;
  // The carry holds whole elements, at least 64 KiB of them (an element cut by the ring's end,
  // or data at an address the element type cannot be read from).
  std::vector<char> carry{};
  std::size_t carried = 0;
  std::chrono::steady_clock::time_point look_until{};
  unsigned idle = 0;

  void run() {
    if (reduce) carry.resize(std::max<std::size_t>(1, (64 << 10) / reduce->element) * reduce->element);
    if (!out_link) out_bytes = 0;
    if (!in_link) in_bytes = 0;
    while (sending() || got < in_bytes) {
      bool moved = send_some();
      moved |= receive_some();
      if (moved) {
        idle = 0;
        continue;
      }
      check_peers();
      if (keep_looking()) continue;
      sleep();
    }
  }

  /// Sealed bytes still waiting to leave are part of the send.
  bool sending() const { return sent < out_bytes || (out_link && out_link->tls && out_link->tls->has_output()); }

  [[noreturn]] void broke(int peer, const char* how) const {
    ring_member_lost(peer, std::string("its link broke during ") + during + " (" + how + ")");
  }
  [[noreturn]] void ended(int peer) const {
    ring_member_lost(peer, std::string("closed its link during ") + during + " (it ended)");
  }

  bool send_some() {
    if (out_link && out_link->tls) {
      if (sent < out_bytes) {
        auto w = out_link->tls->send_some(out + sent, out_bytes - sent);
        if (w < 0) broke(to, out_link->tls->why().c_str());
        sent += static_cast<std::size_t>(w);
        return w > 0;
      }
      if (!out_link->tls->has_output()) return false;
      if (!out_link->tls->flush()) broke(to, out_link->tls->why().c_str());
      return !out_link->tls->has_output();  // the last of it left: look at the loop's end again
    }
    if (sent >= out_bytes) return false;
    if (out_link->shared) {
      auto w = out_link->shared->write_some(out + sent, out_bytes - sent);
      sent += w;
      return w > 0;
    }
    auto w = ::send(out_link->fd, out + sent, out_bytes - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) broke(to, std::strerror(errno));
    if (w <= 0) return false;
    sent += static_cast<std::size_t>(w);
    return true;
  }

  bool receive_some() {
    if (got >= in_bytes) return false;
    if (in_link->tls) {
      auto r = in_link->tls->recv_some(in + got, in_bytes - got);
      if (r < 0) ring_member_lost(from, "its link ended during " + std::string(during) + " (" + in_link->tls->why() + ")");
      got += static_cast<std::size_t>(r);
      return r > 0;
    }
    if (in_link->shared) {
      auto r = reduce ? combine_some(*in_link->shared, *reduce, in, in_bytes, got, carry, carried)
                      : in_link->shared->read_some(in + got, in_bytes - got);
      if (!reduce) got += r;
      return r > 0;
    }
    auto r = ::recv(in_link->fd, in + got, in_bytes - got, MSG_DONTWAIT);
    if (r == 0) ended(from);
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) broke(from, std::strerror(errno));
    if (r <= 0) return false;
    got += static_cast<std::size_t>(r);
    return true;
  }

  /// Nothing moved. A peer that ended wrote all it will (and it has been read by now).
  void check_peers() const {
    if (sending() && out_link->ended) ended(to);
    if (got < in_bytes && in_link->ended) ended(from);
  }

  /// Whether to look at shared memory a little longer before sleeping.
  bool keep_looking() {
    bool any_shared = (sent < out_bytes && out_link->shared) || (got < in_bytes && in_link->shared);
    if (!any_shared) return false;
    auto now = std::chrono::steady_clock::now();
    if (idle++ == 0) look_until = now + look_for;
    if (now >= look_until) return false;
    ::sched_yield();
    return true;
  }

  /// Sleeps until a link is ready (a shared link: its doorbell), taking hellos meanwhile.
  void sleep() {
    auto& pf = mesh.poll_set_;
    pf.clear();
    bool sleeping = true;
    if (sending()) {
      if (out_link->shared) {
        sleeping &= out_link->shared->sleep_for_write();
        pf.push_back({out_link->shared->doorbell(), POLLIN, 0});
        pf.push_back({out_link->fd, POLLIN, 0});  // only its end arrives here
      } else {
        pf.push_back({out_link->fd, POLLOUT, 0});
      }
    }
    if (got < in_bytes) {
      if (in_link->shared) {
        sleeping &= in_link->shared->sleep_for_read();
        pf.push_back({in_link->shared->doorbell(), POLLIN, 0});
      }
      pf.push_back({in_link->fd, POLLIN, 0});
    }
    auto n = pf.size();
    // Asleep, it takes the hellos of the links made to it: a peer may wait on its handshake.
    int r = sleeping ? mesh.wait(pf, mesh_stall_ms) : 1;
    if (r < 0) r = 1;  // interrupted: look again
    for (auto* l : {out_link, in_link})
      if (l && l->shared) l->shared->woke();
    idle = 0;
    if (r <= 0) ring_member_lost(got < in_bytes ? from : to, std::string("no progress for 60 s during ") + during);
    if (sleeping) note_hangups(pf, n);
  }

  /// A shared link's socket carries nothing after the hello: readable means its peer ended.
  void note_hangups(const std::vector<pollfd>& pf, std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) {
      if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      for (auto* l : {out_link, in_link}) {
        if (!l || !l->shared || pf[k].fd != l->fd) continue;
        char byte;
        if (::recv(l->fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK) == 0 || (pf[k].revents & (POLLHUP | POLLERR)))
          l->ended = true;
      }
    }
  }
};

void member_mesh::exchange(int to, const void* out, std::size_t out_bytes, int from, void* in, std::size_t in_bytes,
                           const char* during, const reduction* reduce) {
  peer_link* out_link = to >= 0 && out_bytes ? &link(to) : nullptr;
  peer_link* in_link = from >= 0 && in_bytes ? &link(from) : nullptr;
  if (reduce && in_link && !in_link->shared) {
    // A socket's bytes are copied out of the kernel anyway: receive, then combine.
    std::vector<char> incoming(in_bytes);
    exchange(to, out, out_bytes, from, incoming.data(), in_bytes, during);
    reduce->combine(reduce->op, in, incoming.data(), in_bytes / reduce->element);
    return;
  }
  exchange_run{*this, to, from, static_cast<const char*>(out), static_cast<char*>(in), out_bytes, in_bytes, during,
               reduce, out_link, in_link}
      .run();
}

}  // namespace fiber::detail
