// The ring's rendezvous store, kept by the master for one run of its members: keys set, added to
// and read (a read of a key not set yet waits for it, or for its timeout), and every waiting read
// failed at once when a member is lost (the one that would have set the key may be it). The
// answers go through the ring's reply functions. On fiber's loop thread.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include "fiber/detail/unique_function.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

class rendezvous_store {
 public:
  using reply_fn = unique_function<void(const std::string& peer, std::uint64_t request, std::string_view value)>;
  using fail_fn = unique_function<void(const std::string& peer, std::uint64_t request, errc code, const std::string& why)>;

  rendezvous_store(asio::io_context& io, reply_fn reply, fail_fn fail);
  ~rendezvous_store();
  rendezvous_store(const rendezvous_store&) = delete;
  rendezvous_store& operator=(const rendezvous_store&) = delete;

  void set(const std::string& peer, std::uint64_t request, const std::string& key, std::string value);
  /// Adds `delta` to the number the key holds (0 when not set); answers with the sum (8 bytes).
  void add(const std::string& peer, std::uint64_t request, const std::string& key, std::int64_t delta);
  /// Answers with the key's value now, or once it is set; fails after `timeout`, or at once with
  /// member_lost when `lost` says a member was lost.
  void get(const std::string& peer, std::uint64_t request, const std::string& key, std::chrono::milliseconds timeout,
           const std::string* lost);
  /// A value the ring sets itself (a member's rank on its host): waiting reads get it.
  void put(const std::string& key, std::string value);
  /// Every read waiting fails with member_lost and `why`.
  void fail_waiting(const std::string& why);
  /// A new run starts from nothing.
  void clear() { values_.clear(); }
  /// The loop stops: waiting reads are dropped, their timers cancelled.
  void drop_waiting() noexcept;
  std::size_t waiting() const;

 private:
  struct waiter {
    std::string peer;
    std::uint64_t request;
    std::shared_ptr<asio::steady_timer> timer;
  };
  void wake(const std::string& key);
  void timed_out(const std::string& peer, std::uint64_t request, const std::string& key, std::chrono::milliseconds timeout);

  asio::io_context& io_;
  reply_fn reply_;
  fail_fn fail_;
  std::unordered_map<std::string, std::string> values_;
  std::unordered_map<std::string, std::vector<waiter>> waiting_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // a timer that fires after the store went does nothing
};

}  // namespace fiber::detail
