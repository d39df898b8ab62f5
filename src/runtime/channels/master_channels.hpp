// The top master's queues and pipes, for the whole tree: the broker (runtime/channels/
// channel_broker), with the readers in this process answered through pending_gets and those in a
// child through `send`; the channel prefixes it hands out to nested masters for their children;
// and the queues and pipes of processes that ended, whose reads fail with errc::maker_gone.
// This process's own puts and gets come through its channel_route face, its children's through
// the *_from calls. On the loop thread.
#pragma once
#include <cstdint>
#include <string>
#include <system_error>
#include <unordered_map>
#include <unordered_set>

#include "fiber/detail/unique_function.hpp"
#include "runtime/channels/channel_broker.hpp"
#include "runtime/channels/channel_route.hpp"
#include "runtime/channels/pending_gets.hpp"

namespace fiber::detail {

class master_channels final : public channel_route {
 public:
  /// Sends to a child by routing id; an error when its connection is gone (`parts` left as it was).
  using send_fn = unique_function<std::error_code(const std::string& peer, multipart&& parts)>;
  /// `gets` outlives this.
  master_channels(pending_gets& gets, send_fn send);

  /// The reserved channel a nested master reads a channel prefix for its new child from: a get
  /// on it is answered with four bytes, unique in the job.
  static constexpr std::uint64_t prefix_channel = 0;
  /// A routing id for a new child, unique in this process; in the top master also the child's
  /// channel prefix (one counter for both, so prefixes handed out never meet them).
  static std::uint32_t new_peer();

  // A child's operations (`peer`, its routing id; `request`, its number for the read).
  void put_from(const std::string& peer, std::uint64_t channel, multipart&& payload);
  void get_from(const std::string& peer, std::uint64_t channel, std::uint64_t request);
  void cancel_from(const std::string& peer, std::uint64_t channel, std::uint64_t request);
  /// Child `peer` ended: its waiting reads get nothing more, and with `end_its_channels` (not while
  /// the master itself ends) its queues and pipes end, with those of the prefixes handed out
  /// through it (its subtree).
  void child_ended(const std::string& peer, bool end_its_channels);

  // channel_route: this process's own operations.
  void put(std::uint64_t channel, multipart&& payload) override;
  void get(std::uint64_t channel, std::uint64_t request) override;
  void cancel_get(std::uint64_t channel, std::uint64_t request) override;
  void release(std::uint64_t channel) noexcept override { broker_.release(channel); }
  void maker_gone(std::uint32_t prefix) override;
  /// Every read of this process fails with errc::closed; every queued message goes.
  void shutdown() noexcept override;

 private:
  bool deliver(const channel_reader& r, std::uint64_t channel, multipart& payload, bool may_run_inline);
  bool maker_has_gone(std::uint64_t channel) const noexcept {
    return !gone_makers_.empty() && gone_makers_.contains(static_cast<std::uint32_t>(channel >> 32));
  }
  void fail_read(const channel_reader& reader, std::uint64_t channel);

  pending_gets& gets_;
  send_fn send_;
  channel_broker broker_;
  std::unordered_set<std::uint32_t> gone_makers_;
  std::unordered_map<std::uint32_t, std::string> handed_out_;  // prefix -> the child it went through
};

}  // namespace fiber::detail
