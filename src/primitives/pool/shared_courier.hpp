// The pool's fiber::shared objects on their way to the workers: which objects each worker holds
// (and must let go once their last handle here goes), the frames a task carries for a worker that
// lacks one, and, for workers on other hosts, one copy per memory domain: its first worker (the
// domain's holder) gets the object whole and copies it into its host's memory for its mates, from
// the master for the first master_fanout domains and after that from a worker that has it (a
// tree: each source serves source_fanout at a time). Which worker is where, and the sending, are
// the pool's (courier_directory). On fiber's loop thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fiber/detail/unique_function.hpp"
#include "fiber/encoding.hpp"
#include "transport/zmq_channel.hpp"

namespace fiber::detail {
class shared_entry;
struct hosted_at;

/// What the courier knows of a worker.
struct courier_worker {
  std::string rid;     // its routing id
  std::string name;    // for the log
  std::string domain;  // its memory domain: the workers that can map one copy
  bool connected = false;
};

/// What the courier asks of the pool.
class courier_directory {
 public:
  virtual ~courier_directory() = default;
  virtual std::optional<courier_worker> find(const std::string& rid) const = 0;
  /// Whether another worker that is not leaving shares `w`'s memory domain.
  virtual bool has_mates(const courier_worker& w) const = 0;
  virtual std::error_code send(const std::string& rid, multipart&& m) = 0;
};

class shared_courier {
 public:
  /// `watch(e)` runs once for each object first sent: the pool arranges to call released(id) on
  /// its loop when the object's last handle here goes.
  shared_courier(std::uint64_t pool_id, courier_directory& workers, unique_function<void(const shared_entry&)> watch);

  /// Workers map the objects from this host's memory (they share the master's).
  void in_host_memory(bool yes) noexcept { host_memory_ = yes; }
  bool in_host_memory() const noexcept { return host_memory_; }

  /// The objects `args` refers to that `w` lacks, as frames to send before its items
  /// (transport/shared_frames.hpp); they are `w`'s from now on. Objects gone since `w` got them
  /// are released to it first.
  struct attached {
    multipart frames;
    std::size_t count = 0;  // objects
    std::size_t bytes = 0;  // of them in the frames (not in host memory, not fetched from a peer)
  };
  attached attach(const courier_worker& w, const writer& args);
  /// The message with what attach gave `w` went: counted as sent.
  void delivered(const attached& a) noexcept;
  /// ... or it did not: `w` never got those objects.
  void undelivered(const courier_worker& w, const attached& a);

  /// The last handle of object `id` here went: its workers let it go.
  void released(std::uint64_t id);
  /// `w` could not take object `id` as it was sent (its host copy or its fetch failed).
  void on_need(const courier_worker& w, std::uint64_t id);
  /// `w` has object `id` whole, and put its domain's copy where `at` says (fd < 0: none);
  /// `server` ("endpoint\npublic key") is where it serves the object to others.
  void on_hosted(const courier_worker& w, const hosted_at& at, const std::string& server);
  /// `w` ended: what it held goes, and with it the copy it made for its domain (a mate takes over).
  void on_worker_ended(const courier_worker& w);

  std::size_t objects_sent() const noexcept { return sent_; }
  std::uint64_t bytes_sent() const noexcept { return bytes_sent_; }
  std::uint64_t bytes_in_host_memory() const noexcept { return bytes_host_; }
  /// How many objects `rid` holds.
  std::size_t held_by(const std::string& rid) const;

  static constexpr int source_fanout = 2, master_fanout = 2;
  /// Below this, an object goes in the message: a memfd's calls and each worker's map cost more
  /// than the copy through the socket (es_round_shared).
  static constexpr std::size_t host_memory_min_bytes = std::size_t(1) << 20;

 private:
  struct host_copy {
    std::string holder;  // the worker getting (or that got) the object whole for its domain
    std::string source;  // the worker it fetches from, until it has it
    int pid = 0, fd = -1;  // where the domain's copy is, once made
    std::vector<std::string> waiting;  // workers of the domain sent `later`, until it is made
  };
  struct object_source {
    std::string rid, endpoint, public_key;  // a worker with the object whole, and its server
    int serving = 0;                        // fetches from it under way
  };
  struct object_sources {
    std::vector<object_source> ready;
    int inflight = 0;                  // holders getting the object whole now
    int master_copies = 0;             // sent whole by the master to a domain's holder
    std::vector<std::string> pending;  // holders waiting for a source
  };
  using held_list = std::vector<std::pair<std::uint64_t, std::weak_ptr<const shared_entry>>>;

  std::size_t attach_for_remote_host(multipart& out, const courier_worker& w, const std::shared_ptr<const shared_entry>& e);
  object_source* free_source(object_sources& src);
  object_source* find_source(std::uint64_t id, const std::string& rid);
  void fetch_from(multipart& out, const courier_worker& w, const shared_entry& e, object_source& from, host_copy& st);
  std::shared_ptr<const shared_entry> entry_held(const std::string& rid, std::uint64_t id) const;
  /// Sends `w` object `id` whole (it waits for it); `as_holder`: it is its domain's holder.
  void send_whole(const courier_worker& w, std::uint64_t id, bool as_holder);
  void send_hosted(const std::string& rid, multipart&& m);
  void release_to(const courier_worker& w, std::uint64_t id);
  void serve_pending(std::uint64_t id);
  void forget_host_copies(std::uint64_t id);
  void on_holder_lost(const courier_worker& w);

  std::uint64_t pool_id_;
  courier_directory& workers_;
  unique_function<void(const shared_entry&)> watch_;
  bool host_memory_ = false;
  std::unordered_map<std::string, held_list> held_;  // by worker
  std::unordered_set<std::uint64_t> watched_;         // objects sent, whose release is watched
  std::map<std::pair<std::string, std::uint64_t>, host_copy> host_copies_;  // by memory domain and object
  std::unordered_map<std::uint64_t, object_sources> sources_;               // by object
  std::size_t sent_ = 0;
  std::uint64_t bytes_sent_ = 0, bytes_host_ = 0;
};

}  // namespace fiber::detail
