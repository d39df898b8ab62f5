// Resident-memory limits for the local backend's children through the kernel's memory cgroups
// (v1), where this host lets fiber make them: each limited child gets a group of its own under
// the master's, limited to its memory_mb (swap included, where the kernel accounts it), with the
// kernel's OOM killer turned off for the group. A child that reaches its limit is then held there
// by the kernel (its allocations wait) and the group's OOM event wakes fiber at once, which stops
// the child and reports its peak (memory.max_usage_in_bytes): the kernel never chooses what to
// kill, and the child never goes past its limit by what it could touch in a poll.
//
// Unusable (make() returns null) where there is no v1 memory controller or its folder is not
// writable (not root, a v2-only host); the local backend then falls back to memory_watch. The
// groups live in `<the master's memory cgroup>/fiber-<pid>`, made when the first child needs one
// and removed with the last; folders of masters that died without removing theirs are removed by
// the next master on the host.
#pragma once
#include <asio/io_context.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "core/process_memory.hpp"
#include "fiber/detail/unique_function.hpp"

namespace fiber::detail {

class memory_cgroups : public std::enable_shared_from_this<memory_cgroups> {
 public:
  /// Told once, on the loop, when the child's group reached its limit: its usage then and its
  /// peak, as the group counted them. The child is held at the limit until its owner stops it.
  using over_fn = unique_function<void(const memory_use& seen)>;

  /// Groups under this process's memory cgroup (`root`: where the v1 memory controller is
  /// mounted); null, with the reason in `why_not`, where fiber cannot make them there.
  static std::shared_ptr<memory_cgroups> make(asio::io_context& io, std::string& why_not,
                                              const std::filesystem::path& root = "/sys/fs/cgroup/memory");
  ~memory_cgroups();
  memory_cgroups(const memory_cgroups&) = delete;
  memory_cgroups& operator=(const memory_cgroups&) = delete;

  /// Moves process `pid` of this host into a group of its own limited to `limit_mb` MiB (the
  /// memory it held already moves with it). Returns the group's number, or 0 when the group could
  /// not be made (the caller limits the child another way).
  std::uint64_t limit(int pid, std::uint64_t limit_mb, over_fn over);
  /// The process ended: its group goes (anything left in it moves to the master's folder first).
  void release(std::uint64_t id);

  /// Groups in use.
  std::size_t size() const noexcept { return groups_.size(); }
  /// The folder its groups are made in.
  const std::filesystem::path& folder() const noexcept { return folder_; }

  memory_cgroups(asio::io_context& io, std::filesystem::path folder);  // through make()

 private:
  struct group;
  void wait_for_oom(std::uint64_t id);

  asio::io_context& io_;
  std::filesystem::path folder_;
  std::map<std::uint64_t, std::unique_ptr<group>> groups_;
  std::uint64_t next_id_ = 1;
};

}  // namespace fiber::detail
