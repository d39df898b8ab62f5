// The managers' wire: calls, replies and the stop, and the helpers both sides use.
//
// Messages (see runtime/protocol.hpp), channel = manager id:
//   call       caller -> master -> server   request = call id; frames: [object u64, method u64],
//                                           then the encoded arguments (head, large frames)
//   reply      server -> master -> caller   request = call id, aux = reply_status
//                                           (runtime/services/service_reply.hpp); frames: the encoded
//                                           result, or a core/remote_failure
//   stop       master -> server             exit
// Every call goes through the master, which relays calls made in other processes (a proxy
// passed to a child) under ids of its own, and answers them all when the server dies.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/remote_failure.hpp"
#include "fiber/detail/completion.hpp"
#include "fiber/detail/message.hpp"
#include "fiber/detail/remote_object.hpp"
#include "fiber/error.hpp"
#include "runtime/protocol.hpp"
#include "runtime/services/service_reply.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {

/// The managers' message kinds (runtime/protocol.hpp routes them by the manager's id, the
/// channel). A call from a worker is flagged flag_expects_reply, so that the master answers
/// service_gone when the manager is gone; a reply relayed to a worker is flagged flag_reply.
namespace manager_kind {
inline constexpr kind call = service_kind<service_block::manager, 0>();
inline constexpr kind reply = service_kind<service_block::manager, 1>();
inline constexpr kind stop = service_kind<service_block::manager, 2>();
}  // namespace manager_kind

/// Completes `c` from a reply's status and frames (a call the master answers itself).
void complete_from_reply(completion<message>& c, std::uint32_t status, multipart&& payload);
/// A call that failed before it was sent.
std::shared_ptr<completion<message>> failed_call(errc code, const std::string& what);
/// A call's frames after its header: [object, method], then the encoded arguments.
multipart call_frames(const object_ref& ref, std::uint64_t method, writer& args);

/// The server's side: a registered function the manager's process runs (manager/server.cpp).
void manager_server_main(std::uint64_t manager_id);

}  // namespace fiber::detail
