// In a nested master (a child that is a master of its own children): carries up to its own
// master what its children send that goes up (by runtime/nested/nested_relay's rule for each
// kind), and brings the answers back down: a read of the tree's queues and pipes (served by the
// top master) under a request of this process, a call to a service above under a number of its
// own. A child that ends takes its asks with it: its reads are withdrawn above, and its queues and
// pipes end there. On the loop thread.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "fiber/detail/unique_function.hpp"
#include "runtime/channels/channel_route.hpp"
#include "runtime/channels/pending_gets.hpp"
#include "runtime/protocol.hpp"

namespace fiber::detail {

class upward_relay : public std::enable_shared_from_this<upward_relay> {
 public:
  /// How a message reaches a child by routing id (an error when it is gone), and one goes up.
  using send_down_fn = unique_function<std::error_code(const std::string& peer, multipart&& parts)>;
  using send_up_fn = unique_function<void(multipart&& parts)>;
  /// `up` (the route to the master above) and `gets` outlive this.
  upward_relay(channel_route& up, send_up_fn send_up, pending_gets& gets, send_down_fn send_down);

  /// A message from child `peer`, not for a service of this process: true when it went up, and
  /// `payload` with it; false when it is this master's to handle.
  bool relay(const std::string& peer, const header& h, multipart& payload);
  /// A call to a service that is not here (a manager's proxy passed down more than one level):
  /// passed up under a number no call of this process uses, its reply to come down.
  void pass_call_up(const std::string& peer, const header& h, multipart&& payload);
  /// A reply from above: true when it answers a call passed up, and it went down to its child.
  bool pass_reply_down(const header& h, multipart& payload);
  /// Child `peer`'s channel prefix (its queues and pipes end with it).
  void note_prefix(const std::string& peer, std::uint32_t prefix) { prefixes_[peer] = prefix; }
  /// Child `peer` ended: its calls' replies are dropped, its queues and pipes end above, and its
  /// waiting reads are withdrawn (an item already on its way goes back to its queue).
  void child_ended(const std::string& peer);

  /// Calls and reads passed up and not answered yet.
  std::size_t calls_pending() const noexcept { return passed_calls_.size(); }
  std::size_t reads_pending() const noexcept { return forwarded_.size(); }

 private:
  void forward_get(const std::string& peer, std::uint64_t channel, std::uint64_t request);

  channel_route& up_;
  send_up_fn send_up_;
  pending_gets& gets_;
  send_down_fn send_down_;
  std::map<std::uint64_t, std::pair<std::string, std::uint64_t>> passed_calls_;  // ours -> (child, its request)
  std::uint64_t next_passed_call_ = 0;
  std::map<std::pair<std::string, std::uint64_t>, std::pair<std::uint64_t, std::uint64_t>> forwarded_;  // (child, its request) -> (channel, ours)
  std::unordered_map<std::string, std::uint32_t> prefixes_;
};

}  // namespace fiber::detail
