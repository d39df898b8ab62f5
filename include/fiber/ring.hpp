/// @file
/// N ranked members started together, and a rendezvous store served by the master.
///
///   void train(fiber::ring_member& me) {
///     if (me.rank() == 0) me.set("model", "v1").get();
///     auto model = me.get("model").get();   // waits until rank 0 has set it
///   }
///   FIBER_REMOTE(train);
///   fiber::ring r(4, &train);
///   r.start().get();   // every member passed its handshake
///   r.join().get();    // every member ended; a member that failed is fiber::errc::member_lost
///
/// Members are processes of the configured backend (rank 0 included: nothing runs outside it),
/// with the needs FIBER_META gave the target. Collectives (allreduce, broadcast, allgather,
/// barrier) run between the members directly: shared memory on one host, TCP across hosts. A
/// member that dies makes the store's waiting and later gets of the others fail with member_lost
/// instead of leaving them waiting, and so do collectives that need it.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "fiber/codec.hpp"
#include "fiber/context.hpp"
#include "fiber/detail/unique_function.hpp"
#include "fiber/meta.hpp"
#include "fiber/op.hpp"
#include "fiber/registry.hpp"
#include "fiber/detail/export.hpp"

namespace fiber {
class ring_member;
/// How a collective combines the members' elements.
enum class reduce { sum, min, max, prod };

namespace detail {
class ring_core;
/// Combines `n` elements: inout[i] = op(inout[i], in[i]).
using combine_fn = void (*)(const void* op, void* inout, const void* in, std::size_t n);
FIBER_API void ring_allreduce(const ring_member& me, void* data, std::size_t count, std::size_t element, combine_fn combine,
                    const void* op);
FIBER_API void ring_broadcast(const ring_member& me, void* data, std::size_t bytes, int root);
FIBER_API void ring_allgather(const ring_member& me, const void* mine, void* all, std::size_t bytes_each);
FIBER_API void ring_reduce_scatter(const ring_member& me, const void* in, void* out, std::size_t count_each, std::size_t element,
                         combine_fn combine, const void* op);
FIBER_API void ring_send(const ring_member& me, const void* data, std::size_t bytes, int peer);
/// Runs `work` (a collective) on the member's collective thread, after its earlier ones.
FIBER_API op<void> ring_async(const ring_member& me, unique_function<void()> work);
FIBER_API void ring_recv(const ring_member& me, void* data, std::size_t bytes, int peer);

template <class T, class F>
void combine(const void* op, void* inout, const void* in, std::size_t n) {
  auto& f = *static_cast<const F*>(op);
  auto* a = static_cast<T*>(inout);
  auto* b = static_cast<const T*>(in);
  for (std::size_t i = 0; i < n; ++i) a[i] = f(a[i], b[i]);
}
}  // namespace detail

/// What a member knows of itself, and its way to the rendezvous store.
class FIBER_API ring_member {
 public:
  /// How long get() waits for a key by default.
  static constexpr std::chrono::milliseconds default_timeout = std::chrono::minutes(5);

  /// This member's rank, 0 to size() - 1.
  int rank() const noexcept { return rank_; }
  /// How many members the ring has.
  int size() const noexcept { return size_; }
  /// Rank among the members on this member's host, and how many they are (known once every
  /// member has started; these wait for that).
  int local_rank() const;
  /// How many members run on this member's host (waits as local_rank does).
  int local_size() const;

  /// Sets `key` (replacing its value); members waiting in get() for it continue.
  op<void> set(std::string key, std::string value) const;
  /// The value of `key`, waiting until some member sets it: errc::timeout after `timeout`,
  /// errc::member_lost once a member of the ring has failed.
  op<std::string> get(std::string key, std::chrono::milliseconds timeout = default_timeout) const;
  /// Adds `delta` to the number stored at `key` (0 when unset) and returns the sum: counters,
  /// tickets, a barrier of your own.
  op<std::int64_t> add(std::string key, std::int64_t delta) const;

  // ---- collectives, between the members directly (not through the master); every member of
  // the ring calls each one in the same order. Blocking. A member that is gone makes them fail
  // with errc::member_lost.

  /// Every member's `data` becomes the element-wise reduction of all members' `data` (the same
  /// length on every member), identical on every member.
  template <class T>
  void allreduce(std::span<T> data, reduce op = reduce::sum) const {
    static_assert(std::is_arithmetic_v<T>, "allreduce with a reduce: arithmetic elements");
    switch (op) {
      case reduce::sum: return allreduce(data, [](T a, T b) { return static_cast<T>(a + b); });
      case reduce::min: return allreduce(data, [](T a, T b) { return b < a ? b : a; });
      case reduce::max: return allreduce(data, [](T a, T b) { return a < b ? b : a; });
      case reduce::prod: return allreduce(data, [](T a, T b) { return static_cast<T>(a * b); });
    }
  }
  /// The same with a user's operation `T op(T, T)` (associative and commutative).
  template <class T, class F>
  void allreduce(std::span<T> data, F op) const {
    static_assert(std::is_trivially_copyable_v<T>, "allreduce: trivially copyable elements");
    detail::ring_allreduce(*this, data.data(), data.size(), sizeof(T), &detail::combine<T, F>, &op);
  }
  /// Every member's `data` becomes `root`'s.
  template <class T>
  void broadcast(std::span<T> data, int root) const {
    static_assert(std::is_trivially_copyable_v<T>, "broadcast: trivially copyable elements");
    detail::ring_broadcast(*this, data.data(), data.size_bytes(), root);
  }
  /// `all` (size() × mine.size() elements) becomes every member's `mine`, in rank order.
  template <class T>
  void allgather(std::span<const T> mine, std::span<T> all) const {
    static_assert(std::is_trivially_copyable_v<T>, "allgather: trivially copyable elements");
    if (all.size() != mine.size() * static_cast<std::size_t>(size_))
      throw error(errc::config_error, "allgather: `all` must hold size() x mine.size() elements");
    detail::ring_allgather(*this, mine.data(), all.data(), mine.size_bytes());
  }
  /// Reduces `in` (size() blocks of out.size() elements, block k for member k) across the members:
  /// member r gets block r of the reduction in `out` (MPI's reduce_scatter_block). The first
  /// half of the ring allreduce: each member sends (N-1)/N of `in`.
  template <class T>
  void reduce_scatter(std::span<const T> in, std::span<T> out, reduce op = reduce::sum) const {
    static_assert(std::is_arithmetic_v<T>, "reduce_scatter with a reduce: arithmetic elements");
    switch (op) {
      case reduce::sum: return reduce_scatter(in, out, [](T a, T b) { return static_cast<T>(a + b); });
      case reduce::min: return reduce_scatter(in, out, [](T a, T b) { return b < a ? b : a; });
      case reduce::max: return reduce_scatter(in, out, [](T a, T b) { return a < b ? b : a; });
      case reduce::prod: return reduce_scatter(in, out, [](T a, T b) { return static_cast<T>(a * b); });
    }
  }
  /// As reduce_scatter above, combining with `op(a, b)`.
  template <class T, class F>
    requires std::is_invocable_r_v<T, F, T, T>
  void reduce_scatter(std::span<const T> in, std::span<T> out, F op) const {
    static_assert(std::is_trivially_copyable_v<T>, "reduce_scatter: trivially copyable elements");
    if (in.size() != out.size() * static_cast<std::size_t>(size_))
      throw error(errc::config_error, "reduce_scatter: `in` must hold size() x out.size() elements");
    detail::ring_reduce_scatter(*this, in.data(), out.data(), out.size(), sizeof(T), &detail::combine<T, F>, &op);
  }

  /// Point to point: `data` to member `peer`, which takes it with recv() of the same size. Like
  /// MPI_Send it may wait until the peer receives (a large message does), so two members that
  /// send to each other at once should order their calls (one sends first, the other receives).
  template <class T>
  void send(std::span<const T> data, int peer) const {
    static_assert(std::is_trivially_copyable_v<T>, "send: trivially copyable elements");
    detail::ring_send(*this, data.data(), data.size_bytes(), peer);
  }
  /// What member `peer` sent with send(); a size other than the one sent is an error.
  template <class T>
  void recv(std::span<T> data, int peer) const {
    static_assert(std::is_trivially_copyable_v<T>, "recv: trivially copyable elements");
    detail::ring_recv(*this, data.data(), data.size_bytes(), peer);
  }

  /// Returns once every member has called it.
  void barrier() const;

  // ---- the same collectives as operations: `co_await` them, or `.get()` when the result is
  // needed. Each runs on a thread of this member's own, after the member's earlier ones, so the
  // caller goes on computing meanwhile (overlap one layer's gradients with the next layer's
  // backward pass). The spans must stay alive and untouched until the operation completes. A
  // blocking collective called meanwhile first waits for the queued ones.
  /// allreduce() as an operation.
  template <class T>
  op<void> async_allreduce(std::span<T> data, reduce how = reduce::sum) const {
    return detail::ring_async(*this, [me = *this, data, how] { me.allreduce(data, how); });
  }
  /// allreduce() with a function of its own, as an operation.
  template <class T, class F>
  op<void> async_allreduce(std::span<T> data, F how) const {
    return detail::ring_async(*this, [me = *this, data, how] { me.allreduce(data, how); });
  }
  /// broadcast() as an operation.
  template <class T>
  op<void> async_broadcast(std::span<T> data, int root) const {
    return detail::ring_async(*this, [me = *this, data, root] { me.broadcast(data, root); });
  }
  /// allgather() as an operation.
  template <class T>
  op<void> async_allgather(std::span<const T> mine, std::span<T> all) const {
    return detail::ring_async(*this, [me = *this, mine, all] { me.allgather(mine, all); });
  }
  /// reduce_scatter() as an operation.
  template <class T>
  op<void> async_reduce_scatter(std::span<const T> in, std::span<T> out, reduce how = reduce::sum) const {
    return detail::ring_async(*this, [me = *this, in, out, how] { me.reduce_scatter(in, out, how); });
  }
  /// send() as an operation.
  template <class T>
  op<void> async_send(std::span<const T> data, int peer) const {
    return detail::ring_async(*this, [me = *this, data, peer] { me.send(data, peer); });
  }
  /// recv() as an operation.
  template <class T>
  op<void> async_recv(std::span<T> data, int peer) const {
    return detail::ring_async(*this, [me = *this, data, peer] { me.recv(data, peer); });
  }
  /// barrier() as an operation.
  op<void> async_barrier() const {
    return detail::ring_async(*this, [me = *this] { me.barrier(); });
  }

  /// For another framework's rendezvous (torch `env://`, gloo, NCCL, Horovod): rank 0 binds a
  /// TCP port first (port 0: the kernel picks a free one) and publishes it through the store, so
  /// no other program can take it in between; every member then gets, in its environment and
  /// returned, MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and, for
  /// gloo and NCCL, GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME. On rank 0, `listen_fd` is the bound,
  /// listening socket: hand it to the framework (torch's TCPStore takes `master_listen_fd`), or
  /// close it just before the framework binds the port itself. Every member calls it.
  struct framework_rendezvous {
    std::vector<std::pair<std::string, std::string>> env;  ///< the variables set, as set
    int listen_fd = -1;  ///< rank 0: the bound, listening socket; -1 elsewhere
  };
  /// The rendezvous above, for this member.
  framework_rendezvous framework_env() const;

  /// How many times the ring was restarted before this member started (ring_options::
  /// max_restarts): 0 on the first run. A restarted ring starts from nothing (a new store, new
  /// links), so a member that should resume reads its own checkpoint when this is not 0.
  int restart() const noexcept { return restart_; }

  /// @cond internal
  /// What travels to the member (codec<ring_member>); not for users: its ring, and the secret the
  /// members prove themselves to each other with (new at each restart).
  struct identity_t {
    std::uint64_t ring = 0;
    std::string secret;
  };
  ring_member(std::uint64_t ring, int rank, int size, std::string secret, int restart = 0)
      : id_{ring, std::move(secret)}, rank_(rank), size_(size), restart_(restart) {}
  const identity_t& identity() const noexcept { return id_; }
  /// @endcond

 private:
  identity_t id_;
  int rank_, size_, restart_;
};

/// @cond internal
template <>
struct codec<ring_member> {
  static void encode(writer& w, const ring_member& m) {
    w.value(m.identity().ring);
    w.value(m.rank());
    w.value(m.size());
    w.value(m.identity().secret);
    w.value(m.restart());
  }
  static ring_member decode(reader& r) {
    auto ring = r.value<std::uint64_t>();
    auto rank = r.value<int>();
    auto size = r.value<int>();
    auto secret = r.value<std::string>();
    auto restart = r.value<int>();
    if (size < 1 || rank < 0 || rank >= size) detail::throw_malformed("ring rank", static_cast<std::size_t>(size), static_cast<std::size_t>(rank));
    return {ring, rank, size, std::move(secret), restart};
  }
};

/// @endcond

/// How a ring is run.
struct ring_options {
  /// A member that fails (exits with an error, is killed, raises) after the ring has started
  /// ends every member, and the whole ring starts again, up to this many times; then join()
  /// fails with member_lost. 0: no restart. A member that cannot start at the first start()
  /// fails start() instead.
  int max_restarts = 0;
};

/// N ranked members started together, each running the same function with its ring_member:
/// collectives (allreduce, broadcast, allgather, ...), point to point, and a key-value store.
class FIBER_API ring {
 public:
  /// `size` members, each running `f(member)`; `f` must be registered with FIBER_REMOTE.
  ring(int size, void (*f)(ring_member&), ring_options options = {})
      : ring(context::default_context(), size, f, options) {}
  /// As above, in `ctx`.
  ring(context& ctx, int size, void (*f)(ring_member&), ring_options options = {});
  /// Moves the members' ownership; the moved-from ring owns none.
  ring(ring&&) noexcept;
  /// Kills this ring's members still running and takes `other`'s.
  ring& operator=(ring&&) noexcept;
  /// Members still running are killed and reaped.
  ~ring();

  /// How many members it has.
  int size() const noexcept;
  /// Starts every member; completes once all passed their handshake (fails with the first
  /// member that could not start, and stops the others).
  op<void> start();
  /// Completes once every member has ended; fails with errc::member_lost naming the first member
  /// that exited with an error, was killed or raised.
  op<void> join();
  /// Each member's exit code once it has ended (-N: killed by signal N).
  std::vector<std::optional<int>> exitcodes() const;
  /// Each member's pid (0 before it is known).
  std::vector<int> pids() const;
  /// How many times the ring has been restarted (ring_options::max_restarts).
  int restarts() const noexcept;

 private:
  std::shared_ptr<detail::ring_core> core_;
};

}  // namespace fiber
