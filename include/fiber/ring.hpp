// fiber/ring.hpp - N ranked members started together, and a rendezvous store served by the master.
//
//   void train(fiber::ring_member& me) {
//     if (me.rank() == 0) me.set("model", "v1").get();
//     auto model = me.get("model").get();   // waits until rank 0 has set it
//   }
//   FIBER_REMOTE(train);
//   fiber::ring r(4, &train);
//   r.start().get();   // every member passed its handshake
//   r.join().get();    // every member ended; a member that failed is fiber::errc::member_lost
//
// Members are processes of the configured backend (rank 0 included: nothing runs outside it),
// with the needs FIBER_META gave the target. A member that dies makes the store's waiting and
// later gets of the others fail with member_lost instead of leaving them waiting.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fiber/codec.hpp"
#include "fiber/context.hpp"
#include "fiber/meta.hpp"
#include "fiber/op.hpp"
#include "fiber/registry.hpp"

namespace fiber {
namespace detail {
class ring_core;
}

/// What a member knows of itself, and its way to the rendezvous store.
class ring_member {
 public:
  /// How long get() waits for a key by default.
  static constexpr std::chrono::milliseconds default_timeout = std::chrono::minutes(5);

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  /// Rank among the members on this member's host, and how many they are (known once every
  /// member has started; these wait for that).
  int local_rank() const;
  int local_size() const;

  /// Sets `key` (replacing its value); members waiting in get() for it continue.
  op<void> set(std::string key, std::string value) const;
  /// The value of `key`, waiting until some member sets it: errc::timeout after `timeout`,
  /// errc::member_lost once a member of the ring has failed.
  op<std::string> get(std::string key, std::chrono::milliseconds timeout = default_timeout) const;
  /// Adds `delta` to the number stored at `key` (0 when unset) and returns the sum: counters,
  /// tickets, a barrier of your own.
  op<std::int64_t> add(std::string key, std::int64_t delta) const;

  // What travels to the member (codec<ring_member>); not for users.
  ring_member(std::uint64_t ring, int rank, int size) : ring_(ring), rank_(rank), size_(size) {}
  std::uint64_t ring_id() const noexcept { return ring_; }

 private:
  std::uint64_t ring_;
  int rank_, size_;
};

template <>
struct codec<ring_member> {
  static void encode(writer& w, const ring_member& m) {
    w.value(m.ring_id());
    w.value(m.rank());
    w.value(m.size());
  }
  static ring_member decode(reader& r) {
    auto ring = r.value<std::uint64_t>();
    auto rank = r.value<int>();
    auto size = r.value<int>();
    if (size < 1 || rank < 0 || rank >= size) detail::throw_malformed("ring rank", static_cast<std::size_t>(size), static_cast<std::size_t>(rank));
    return {ring, rank, size};
  }
};

class ring {
 public:
  /// `size` members, each running `f(member)`; `f` must be registered with FIBER_REMOTE.
  ring(int size, void (*f)(ring_member&)) : ring(context::default_context(), size, f) {}
  ring(context& ctx, int size, void (*f)(ring_member&));
  ring(ring&&) noexcept;
  ring& operator=(ring&&) noexcept;
  /// Members still running are killed and reaped.
  ~ring();

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

 private:
  std::shared_ptr<detail::ring_core> core_;
};

}  // namespace fiber
