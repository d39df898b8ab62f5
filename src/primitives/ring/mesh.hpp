// The links between a ring's members, for collectives: a member listens (an abstract unix socket
// for members on its host, TCP for the others), publishes where in the ring's store, and links
// to a peer when a collective first needs it: the lower rank connects, the higher accepts, and
// the connector proves itself with the ring's secret (hello_desk.hpp). Members on one host then
// move their bytes through shared memory (shared_channel.hpp); the socket stays to tell when the
// peer is gone. Members on other hosts talk TLS 1.3 with the ring's key (sealed_link.hpp). While it
// waits for anything, a member also takes the hellos of the links made to it, so no member waits
// on another's handshake. Blocking, on the member's thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fiber/ring.hpp"
#include "primitives/ring/hello_desk.hpp"
#include "transport/shared_channel.hpp"
#include "primitives/ring/sealed_link.hpp"
#include "transport/reachable_address.hpp"

namespace fiber::detail {

/// A link that makes no progress for this long is taken for lost (its member hangs or is gone).
inline constexpr int mesh_stall_ms = 60'000;
/// Throws fiber::error(member_lost) naming ring member `peer` and `what` happened to its link.
[[noreturn]] void ring_member_lost(int peer, const std::string& what);

class member_mesh {
 public:
  explicit member_mesh(const ring_member& me);
  ~member_mesh();
  member_mesh(const member_mesh&) = delete;

  /// How received elements are combined into `in` instead of copied over it.
  struct reduction {
    std::size_t element;
    combine_fn combine;
    const void* op;
  };

  /// Sends `out` to `to` while receiving `in` from `from` (either may be -1: none), without
  /// deadlocking on full sockets. Throws fiber::error(member_lost) when a link breaks. With a
  /// reduction, what arrives is combined into `in` (from shared memory where it lies, so the
  /// bytes are not copied first).
  void exchange(int to, const void* out, std::size_t out_bytes, int from, void* in, std::size_t in_bytes,
                const char* during, const reduction* reduce = nullptr);

 private:
  struct exchange_run;  // one exchange, in steps (mesh_exchange.cpp)
  struct peer_link {
    int fd = -1;
    std::unique_ptr<shared_channel> shared;  // members on one host; null: bytes go over fd
    std::unique_ptr<sealed_link> tls;           // members on other hosts: fd's bytes are TLS records
    bool ended = false;                      // a shared link's peer hung up (what it wrote stays)
  };
  peer_link& link(int peer);
  peer_link& dial_across_hosts(int peer, int fd);
  peer_link& accept_from(int peer);
  void listen();
  /// Takes the links whose hellos are done (hello_desk::step).
  void take_hellos();
  /// Polls `pf` and the desk's descriptors for at most `ms`; takes hellos that moved. Returns > 0
  /// when anything was ready (`pf`'s revents say which of its own), 0 when `ms` passed.
  int wait(std::vector<pollfd>& pf, int ms);

  ring_member me_;
  std::string host_;
  int unix_listener_ = -1, tcp_listener_ = -1;
  std::unique_ptr<hello_desk> desk_;
  std::map<int, peer_link> links_;  // by rank
  std::vector<pollfd> poll_set_;
};


/// The mesh of this process's member of ring `me` (made on first use).
member_mesh& mesh_of(const ring_member& me);

}  // namespace fiber::detail
