// The Docker Engine API's containers: create, start, wait, signal, stop and remove them, read and
// follow their logs, describe and list them, and copy files into and out of them. Calls go through
// the engine's connection (docker_engine); each completes on the io_context.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "backend/docker/docker_done.hpp"

namespace fiber::detail {
class docker_engine;

struct container_spec {
  std::string image;
  std::vector<std::string> cmd;
  std::vector<std::string> env;                  // "KEY=value"
  std::map<std::string, std::string> labels;
  std::vector<std::string> binds;                // "host:container[:ro]" or "volume:container"
  std::string network_mode;                      // "host", "bridge" or empty (the engine's default)
  double cpus = 0;                               // 0: no limit
  std::int64_t memory_bytes = 0;                 // 0: no limit
  int gpus = 0;                                  // DeviceRequests for nvidia GPUs
  std::string name;                              // empty: the engine picks one
  bool init = false;                             // the engine's init (tini) as pid 1
  int stop_seconds = -1;                         // `docker stop` without -t: SIGKILL this long after
                                                 // SIGTERM (StopTimeout); -1: the engine's (10 s)
  int restarts = 0;                              // > 0: the engine starts it again after a non-zero
                                                 // exit, this many times at most (on-failure)
  std::string user;                              // "uid:gid"; empty: the image's
  std::string working_dir;                       // empty: the image's
};

/// The body of POST /containers/create for `spec` (what `fiber run --dry-run` shows).
std::string container_create_body(const container_spec& spec);

/// A removal that failed only because the container is gone already.
bool benign_remove_error(const std::string& why);

struct container_summary {
  std::string id;
  std::string state;   // created, running, exited, ...
  std::string status;  // the engine's words: "Up 3 minutes", "Exited (3) 5 seconds ago"
  std::string image;
  std::int64_t created = 0;  // seconds since the epoch
  std::map<std::string, std::string> labels;
};

class docker_containers {
 public:
  template <class T>
  using done = docker_done<T>;
  explicit docker_containers(docker_engine& engine) : engine_(engine) {}

  void create(const container_spec& spec, done<std::string> on_done);  // result: the container id
  void start(const std::string& id, done<bool> on_done);
  /// Completes when the container has stopped; result: its exit code.
  void wait(const std::string& id, done<int> on_done);
  void kill(const std::string& id, int signal, done<bool> on_done);
  /// SIGTERM, then SIGKILL after `grace_seconds`, as `docker stop` does; done once it stopped.
  void stop(const std::string& id, int grace_seconds, done<bool> on_done);
  /// Completes once the container is gone (also when another removal of it was under way).
  void remove(const std::string& id, bool force, done<bool> on_done);
  /// stdout and stderr, demultiplexed (each stream in order; between the two, as the engine
  /// recorded them).
  void logs(const std::string& id, done<std::string> on_done);
  /// Output as the container writes it, until it ends: `on_output(stream, bytes)` with stream 1
  /// (stdout) or 2 (stderr); `on_done` when the stream closes. `since`: from this time on only
  /// ("seconds.nanoseconds" since the epoch; empty: from the container's start).
  void follow_logs(const std::string& id, unique_function<void(int, std::string_view)> on_output, done<bool> on_done,
                   const std::string& since = {});
  /// The container's description (GET /containers/{id}/json), as JSON text.
  void inspect(const std::string& id, done<std::string> on_done);
  /// The host pid of the container's main process (0 when it is not running).
  void pid(const std::string& id, done<int> on_done);
  /// Containers (running or not) carrying label `key`, with their labels.
  void list_labeled(const std::string& key, done<std::vector<container_summary>> on_done);
  /// Ids of the containers (running or not) carrying label `key=value`.
  void list(const std::string& key, const std::string& value, done<std::vector<std::string>> on_done);
  /// Extracts the tar archive `tar` at `path` in container `id` (created, not necessarily started:
  /// the engine does the work, the image needs no tar). The archive's owners are kept.
  void put_archive(const std::string& id, const std::string& path, std::string tar, done<bool> on_done);
  /// `path` in container `id` as a tar archive (its top entry named as the path's last part).
  void get_archive(const std::string& id, const std::string& path, done<std::string> on_done);

 private:
  docker_engine& engine_;
};

}  // namespace fiber::detail
