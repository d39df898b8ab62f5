// The master's broker for queues and pipes: per channel, the messages nobody has asked for yet
// and the readers waiting for one. Readers are in this process (no peer) or in a child (its
// routing id); how a message reaches a reader is the caller's (`deliver`).
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fiber/detail/unique_function.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {

struct channel_reader {
  std::string peer;  // empty: a getter in this process
  std::uint64_t request = 0;
};

class channel_broker {
 public:
  /// Hands `payload` to `reader`; false when the reader is gone, leaving `payload` intact.
  /// `may_run_inline`: false when called inside a get's initiation (a local reader must post).
  using deliver_fn =
      unique_function<bool(const channel_reader& reader, std::uint64_t channel, multipart& payload, bool may_run_inline)>;
  explicit channel_broker(deliver_fn deliver) : deliver_(std::move(deliver)) {}

  /// To the first waiting reader that is still there, else queued. `from_network`: the put came
  /// from a peer, so a local reader may resume inline.
  void put(std::uint64_t channel, multipart&& payload, bool from_network);
  /// The oldest queued message, else the reader waits.
  void get(std::uint64_t channel, channel_reader reader);
  /// Withdraws a waiting reader; false when it was not waiting (its message is on its way).
  bool cancel(std::uint64_t channel, const std::string& peer, std::uint64_t request);
  /// The channel's owner is gone: its storage goes once no reader waits (unread messages logged).
  void release(std::uint64_t channel) noexcept;
  /// A child that ended: its waiting reads must not receive messages.
  void forget_peer(const std::string& peer);
  void clear() noexcept { channels_.clear(); }
  /// The channels whose ids carry `prefix` (made by one process) end: their storage goes, and
  /// the readers that waited on them are returned with their channel; `dropped` counts the
  /// messages nobody read.
  std::vector<std::pair<std::uint64_t, channel_reader>> end_prefix(std::uint32_t prefix, std::size_t& dropped);

  std::size_t queued(std::uint64_t channel) const;
  std::size_t waiting(std::uint64_t channel) const;

 private:
  struct channel_state {
    std::deque<multipart> items;
    std::deque<channel_reader> readers;
    bool released = false;
  };
  deliver_fn deliver_;
  std::unordered_map<std::uint64_t, channel_state> channels_;
};

}  // namespace fiber::detail
