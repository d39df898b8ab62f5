// What a master passes to a worker through the backend's environment: the contract between the
// master that spawns (primitives/process), the backends that start it, and the worker's init.
#pragma once
#include <cstdlib>
#include <string>

namespace fiber::detail {
inline constexpr const char* env_token = "FIBER_WORKER_TOKEN";        // routing id, numeric
inline constexpr const char* env_endpoint = "FIBER_WORKER_ENDPOINT";  // master's address
inline constexpr const char* env_job = "FIBER_WORKER_JOB";            // job id
/// The path of a file holding the child's credentials (job_keys::for_worker's text), which only
/// its user can read: never the credentials themselves, which an engine shows with the spec.
inline constexpr const char* env_keys_file = "FIBER_WORKER_KEYS_FILE";
/// The child's one-time word: its hello must carry it, or its master refuses it before sending
/// it anything (a process that holds the job's keys cannot take a sibling's place). Useless
/// without the keys, so it may be seen with the spec.
inline constexpr const char* env_nonce = "FIBER_WORKER_NONCE";
/// The name of the credentials themselves, which no child is ever given in its environment: the
/// top master refuses a spawn request that sets it (runtime/nested/spawn_policy).
inline constexpr const char* env_keys = "FIBER_WORKER_KEYS";
inline constexpr const char* env_name = "FIBER_WORKER_NAME";          // process name
inline constexpr const char* env_parent_pid = "FIBER_WORKER_PARENT_PID";
inline constexpr const char* env_depth = "FIBER_WORKER_DEPTH";        // 1 for the master's children, 2 below, ...
inline constexpr const char* env_tree_name = "FIBER_WORKER_TREE_NAME";  // its name in the tree: Process-1/Process-2
/// A child the top master started for a nested master (runtime/nested/spawn_host): its number there,
/// which the children it asks for in turn name as their parent.
inline constexpr const char* env_spawn_handle = "FIBER_SPAWN_HANDLE";
/// remote_transport=hub: the abstract unix name this host's hub listens on (runtime/hubs/host_hub); a
/// child links to it rather than to its master's address.
inline constexpr const char* env_hub = "FIBER_WORKER_HUB";
/// How long a child waits for its host's hub to listen before it links to its master directly.
inline constexpr int hub_patience_ms = 10000;
/// A host hub's own: its master's max_message_bytes, start_timeout_ms, heartbeat_interval_ms and
/// heartbeat_timeout_ms, separated by spaces (it takes no config of its own).
inline constexpr const char* env_hub_settings = "FIBER_HUB_SETTINGS";
inline constexpr const char* worker_flag = "--fiber-worker";
/// The argument that starts a host hub rather than a worker.
inline constexpr const char* hub_flag = "--fiber-hub";
/// Exit code of a worker the master refused (binary or protocol mismatch).
inline constexpr int exit_refused = 3;
/// Exit code of a worker that lost its master (as one whose parent died before it started).
inline constexpr int exit_master_lost = 70;
/// Exit code of a pool worker that had notice of its planned end and handed back the item it was
/// running (it would not have finished in time): nothing it held is its items' doing.
inline constexpr int exit_drained = 71;

/// Variable `name` of this process's environment; empty when it is not set.
inline std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
}  // namespace fiber::detail
