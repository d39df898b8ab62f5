// Where a backend's children find the job's credentials. Not in their environment or argv: a
// pod's, a container's and a Slurm job's environment is shown to whoever may read the spec
// (`kubectl get pod`, `docker inspect`, `scontrol show job`). A child gets only the path of a file
// its own user can read, in FIBER_WORKER_KEYS_FILE.
#pragma once
#include <filesystem>
#include <map>
#include <string>

namespace fiber::detail {

class secret_store {
 public:
  /// In memory (a memfd of mode 0600 per text): a child on this host opens it through
  /// /proc/<this pid>/fd/N, which the kernel lets only this user's processes do, and it goes
  /// with this process. For the local backend and a host hub's forks.
  static secret_store in_memory();
  /// In files of mode 0600 in a folder of its own (0700) made under `root`, for children on other
  /// hosts that share the file system (a Slurm cluster's home folders); removed on destruction.
  static secret_store in_folder(std::filesystem::path root);

  secret_store(secret_store&&) noexcept;
  secret_store& operator=(secret_store&&) = delete;
  secret_store(const secret_store&) = delete;
  secret_store& operator=(const secret_store&) = delete;
  ~secret_store();

  /// The path a child opens to read `text`: one file per distinct text (a master's own keys, and
  /// those of the nested masters it starts children for). fiber::error(spawn_failed) naming what
  /// failed when it cannot be made.
  std::string path_for(const std::string& text);

 private:
  secret_store() = default;
  std::filesystem::path root_;    // in_folder: where its own folder goes; empty: in memory
  std::filesystem::path folder_;  // in_folder: made at the first text
  std::map<std::string, std::string> paths_;
  std::map<std::string, int> fds_;  // in memory: the memfd behind each text
};

}  // namespace fiber::detail
