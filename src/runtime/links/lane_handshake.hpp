// Moving a child's direct link to shared memory (transport/shared_lane), right after its greeting.
// A child on the master's host greets with link_greeting_shared and sends nothing more until the
// master answers on the socket, in one frame: "shared", with the segment and both doorbells
// passed alongside (SCM_RIGHTS), or "socket". From its answer on, each side's bytes go through
// the lane, so none can be on the socket behind it; the socket stays to hear the other's end.
//
// The master answers only a child that proved itself with the job's password, on a unix socket
// only another process of this user could connect to (direct_listener), and a child maps only
// what its master passed: a segment sealed against resizing (shared_channel::join).
#pragma once
#include <asio/io_context.hpp>
#include <chrono>
#include <string_view>

#include "transport/stream_link.hpp"

namespace fiber::detail {

/// A child's greeting that asks for shared memory (otherwise as link_greeting).
inline constexpr std::string_view link_greeting_shared = "fiber direct link 1 shared";

/// The master's side, once the greeting proved the child: answers on `link`'s socket, with a
/// fresh lane when `offer` (and the host gives one) and the link moved to it. False when the
/// answer could not be written: the link is to be closed.
bool answer_lane(stream_link& link, asio::io_context& io, bool offer);

/// The child's side, right after its greeting: waits up to `patience` for the master's answer on
/// `link`'s socket and, when it says "shared", moves the link to the lane passed with it. Throws
/// fiber::error: the master closed the link (it refused the greeting), did not answer in time,
/// or answered what no master of this version says.
void await_lane(stream_link& link, asio::io_context& io, std::chrono::milliseconds patience);

}  // namespace fiber::detail
