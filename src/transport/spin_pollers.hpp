// What a spinning caller of an io_context checks between its polls of the io_context: sources of
// work that no descriptor announces while their peer is told that this side is awake, so that
// the peer need not ring it (a shared-memory lane: transport/shared_lane). A service of the
// io_context, so that the loop that spins (runtime/event_loop) and the links that poll (transport)
// meet without knowing of each other.
//
// A spin is begin(), then poll() between the io_context's polls. The pollers stay awake after it
// (their peers still not ringing), since the caller that spun usually spins again soon: a round
// trip's peer answers while this side's caller is between its send and its next receive. Before
// anything blocks on the io_context, sleep(): each poller tells its peer to ring it again, or,
// when work came meanwhile, posts that work, so that nothing waits unannounced on a sleeping loop.
// So every blocking run of the io_context must call sleep() first (runtime/event_loop does); an
// io_context run by its owner's own code is never spun, and its pollers never leave the doorbell.
// begin, poll and sleep run on the thread that drives the loop; add from any thread.
#pragma once
#include <asio/execution_context.hpp>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace fiber::detail {

class spin_pollers : public asio::execution_context::service {
 public:
  using key_type = spin_pollers;
  static inline asio::execution_context::id id;

  struct poller {
    virtual ~poller() = default;
    /// The spin begins: the peer may stop ringing this side.
    virtual void awake() noexcept = 0;
    /// Runs what became ready since; true when it ran something.
    virtual bool poll() = 0;
    /// The spin ends: the peer must ring again; work that came meanwhile is posted.
    virtual void asleep() noexcept = 0;
  };

  /// At most this many are polled (the first added that are still alive); the others wait on
  /// their doorbells: a spin that read a thousand rings would be slower than one wake-up.
  static constexpr std::size_t most_polled = 64;

  explicit spin_pollers(asio::execution_context& context) : asio::execution_context::service(context) {}

  /// Polled from the next spin on, while it lives.
  void add(const std::shared_ptr<poller>& p);
  /// The pollers alive now are told a spin begins (those of the last spin, when they have not
  /// slept since); false when there are none (nothing to poll).
  bool begin();
  /// Polls each once; true when one ran something.
  bool poll();
  /// Before the io_context blocks: tells each that was awake that the spin is over, and lets go of them.
  void sleep() noexcept;
  /// Whether pollers are awake (a sleep() is due before blocking).
  bool awake() const noexcept { return !spinning_.empty(); }
  /// Pollers held (alive or not yet swept); for tests.
  std::size_t size();

 private:
  void shutdown() override;

  std::mutex mutex_;
  std::vector<std::weak_ptr<poller>> pollers_;
  std::vector<std::shared_ptr<poller>> spinning_;  // the driving thread's, from begin() to sleep()
};

}  // namespace fiber::detail
