// What a master passes to a worker through the backend's environment: the contract between the
// master that spawns (primitives/process), the backends that start it, and the worker's init.
#pragma once

namespace fiber::detail {
inline constexpr const char* env_token = "FIBER_WORKER_TOKEN";        // routing id, numeric
inline constexpr const char* env_endpoint = "FIBER_WORKER_ENDPOINT";  // master's address
inline constexpr const char* env_job = "FIBER_WORKER_JOB";            // job id
inline constexpr const char* env_keys = "FIBER_WORKER_KEYS";          // see job_keys::for_worker
inline constexpr const char* env_name = "FIBER_WORKER_NAME";          // process name
inline constexpr const char* env_parent_pid = "FIBER_WORKER_PARENT_PID";
inline constexpr const char* env_depth = "FIBER_WORKER_DEPTH";        // 1 for the master's children, 2 below, ...
inline constexpr const char* env_tree_name = "FIBER_WORKER_TREE_NAME";  // its name in the tree: Process-1/Process-2
/// A child the top master started for a nested master (runtime/spawn_host): its number there,
/// which the children it asks for in turn name as their parent.
inline constexpr const char* env_spawn_handle = "FIBER_SPAWN_HANDLE";
inline constexpr const char* worker_flag = "--fiber-worker";
/// Exit code of a worker the master refused (binary or protocol mismatch).
inline constexpr int exit_refused = 3;
/// Exit code of a worker that lost its master (as one whose parent died before it started).
inline constexpr int exit_master_lost = 70;
}  // namespace fiber::detail
