// What a master passes to a worker through the backend's environment.
#pragma once

namespace fiber::detail {
inline constexpr const char* env_token = "FIBER_WORKER_TOKEN";        // routing id, numeric
inline constexpr const char* env_endpoint = "FIBER_WORKER_ENDPOINT";  // master's address
inline constexpr const char* env_job = "FIBER_WORKER_JOB";            // job id
inline constexpr const char* env_keys = "FIBER_WORKER_KEYS";          // see job_keys::for_worker
inline constexpr const char* env_name = "FIBER_WORKER_NAME";          // process name
inline constexpr const char* env_parent_pid = "FIBER_WORKER_PARENT_PID";
inline constexpr const char* worker_flag = "--fiber-worker";
/// Exit code of a worker the master refused (binary or protocol mismatch).
inline constexpr int exit_refused = 3;

/// Set by fiber::init in a master.
bool& init_was_called();
/// Guards against a program that does not call fiber::init: in a process fiber started as a
/// child, it ends the process (running main again would start children of its own); in a master,
/// it throws before any child is started.
void require_init();

/// The worker's whole life: handshake, target, report. Returns the exit code.
int run_worker();
/// Flushes stdio and leaves the process without running the program's static destructors.
[[noreturn]] void exit_worker(int code);
}  // namespace fiber::detail
