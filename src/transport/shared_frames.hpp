// fiber::shared objects sent apart from the messages that refer to them: the frames a sender
// attaches for a receiver that lacks an object, and how the receiver takes them in.
//
// Each object is a description frame (shared_desc), then either its encoding (the head, then its
// large frames, sent without copies) or, for a receiver on the sender's host, the sizes of the
// head and frames in the sender's shared-memory copy, which the receiver maps.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "fiber/detail/shared_entry.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {

struct shared_desc {
  std::uint64_t id = 0;
  std::uint64_t type = 0;
  std::uint64_t head = 0;   // bytes of the head
  std::uint32_t blobs = 0;  // large frames
  std::uint8_t host_memory = 0;
  std::uint8_t reserved[3] = {};
  std::int32_t pid = 0;  // host memory: /proc/<pid>/fd/<fd> is the copy
  std::int32_t fd = -1;
};
static_assert(sizeof(shared_desc) == 40);

/// Appends `e` to `m`: in this host's shared memory (made on first use) when `host_memory`,
/// else its encoding. Returns the bytes of the object that go through the connection.
std::size_t append_shared(multipart& m, const shared_entry& e, bool host_memory);

/// Takes in the `count` objects that start at m[at] (this process holds them until released);
/// returns the index of the frame after them. Throws malformed_message on frames that are not
/// such objects.
std::size_t receive_shared(multipart& m, std::size_t at, std::size_t count);

}  // namespace fiber::detail
