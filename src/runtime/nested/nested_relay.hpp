// In a nested master (a child that is a master of its own children), which of its children's
// messages go on up to its own master, and how; the rest are this master's to handle. One rule
// for each of the runtime's kinds, in a switch with no default: a kind added without a rule does
// not compile (-Wswitch, an error in fiber's build), so no kind can be forgotten in nested runs.
#pragma once
#include <cstdint>

#include "runtime/protocol.hpp"

namespace fiber::detail {

enum class relay : std::uint8_t {
  here,         // this master's, nested or not (a child's hello and done, a probe)
  as_is,        // up unchanged, under a header of its own kind and aux (recorder events, views)
  channel_put,  // to the channel's owner above (upstream_client::put)
  channel_get,  // a read of a channel above, answered back down (runtime/nested/upward_relay)
  cancel_get,   // withdraws such a read
  maker_gone,   // the channels of a child of this master ended with it
};

/// What a nested master does with a child's message of runtime kind `k`.
relay relay_of(kind k) noexcept;

/// A message of kind `k` passed up as it came (relay::as_is): `payload` under a header with
/// `k` and `aux` alone (the channel and the request were the child's, with this master).
multipart passed_up(kind k, std::uint32_t aux, multipart&& payload);

}  // namespace fiber::detail
