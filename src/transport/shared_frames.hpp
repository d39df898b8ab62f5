// fiber::shared objects sent apart from the messages that refer to them: the frames a sender
// attaches for a receiver that lacks an object, and how the receiver takes them in.
//
// Each object is a description frame (shared_desc), then, by its `how`:
//   frames       its encoding: the head, then its large frames (sent without copies); with
//                `host_it`, the receiver also copies it into its host's shared memory and says
//                where, so that the others of its host map that copy instead of receiving theirs
//   host_memory  the sizes of the head and frames in a copy in the receiver's host's shared
//                memory, made by process `pid` (the master, or a worker of that host), which the
//                receiver maps through /proc/<pid>/fd/<fd>
//   later        nothing yet: the copy of the receiver's host is being made; where it is comes in
//                a message of its own
//   from_peer    where to fetch it: another worker that holds it whole serves it
//                (transport/shared_server.hpp): its endpoint and public key, one frame
// With `report`, a receiver that gets the object whole (in frames or from a peer) says so, with
// where its own server is: it becomes a source for the workers of other hosts.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fiber/detail/shared_entry.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {

struct shared_desc {
  enum : std::uint8_t { frames = 0, host_memory = 1, later = 2, from_peer = 3 };
  std::uint64_t id = 0;
  std::uint64_t type = 0;
  std::uint64_t head = 0;   // bytes of the head
  std::uint32_t blobs = 0;  // large frames
  std::uint8_t how = frames;
  std::uint8_t host_it = 0;  // frames, from_peer: make this host's copy, and say where it is
  std::uint8_t report = 0;   // frames, from_peer: say it is here, and serve it to others
  std::uint8_t reserved = 0;
  std::int32_t pid = 0;  // host memory: /proc/<pid>/fd/<fd> is the copy
  std::int32_t fd = -1;
};
static_assert(sizeof(shared_desc) == 40);

/// Appends `e`'s encoding to `m`; returns its bytes (what goes through the connection).
std::size_t append_shared_frames(multipart& m, const shared_entry& e, bool host_it = false, bool report = false);
/// Appends where the receiver fetches `e` from: the server of another worker, at `endpoint`
/// with `public_key` (transport/shared_server.hpp).
void append_shared_from_peer(multipart& m, const shared_entry& e, const std::string& endpoint,
                             const std::string& public_key, bool host_it);
/// Appends where `e` lies in its host's shared memory: descriptor `fd` of process `pid`.
void append_shared_host(multipart& m, const shared_entry& e, int pid, int fd);
/// Appends that `e` comes later (shared_desc::later).
void append_shared_later(multipart& m, const shared_entry& e);
/// The master's own: in this host's shared memory (made on first use) when `host_memory`, else
/// its encoding. Returns the bytes that go through the connection.
std::size_t append_shared(multipart& m, const shared_entry& e, bool host_memory);

/// What a receiver took in.
struct shared_received {
  std::vector<std::uint64_t> later;   // announced, not there yet (shared_desc::later)
  std::vector<std::uint64_t> failed;  // a host copy that could not be mapped: ask for the frames
  std::string why_failed;             // ... and why, for the log
  std::vector<std::shared_ptr<const shared_entry>> to_host;  // host_it: to copy into host memory
  std::vector<std::uint64_t> to_report;                      // report: here whole, to say so
  struct fetch {
    std::uint64_t id;
    std::string endpoint, public_key;
    bool host_it;
  };
  std::vector<fetch> to_fetch;  // from_peer
};

/// Takes in the `count` objects that start at m[at] (this process holds them until released);
/// returns the index of the frame after them. Throws malformed_message on frames that are not
/// such objects.
std::size_t receive_shared(multipart& m, std::size_t at, std::size_t count, shared_received& out);
/// The same, for a receiver that expects every object in full: throws what `out` would say.
std::size_t receive_shared(multipart& m, std::size_t at, std::size_t count);

}  // namespace fiber::detail
