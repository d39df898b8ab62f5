// `fiber cp` on Kubernetes: a fiber program started with FIBER_CLAIM_COPY_PORT set does not run
// its main; fiber::init serves the claim mounted at FIBER_CLAIM_COPY_ROOT over HTTP instead, for
// the `fiber` command to reach through the API server's pod proxy (no exec, no WebSocket, no tar
// in the image). Each request carries the token in the file FIBER_CLAIM_COPY_TOKEN_FILE names (a
// Secret mounted in the helper pod: the pod's spec, which readers of the namespace see, holds
// only the path).
//
//   GET /tree?path=P   the file or folder P of the claim, packed (core/file_tree)
//   PUT /tree?path=P   the packed body written as P (its folders made as needed)
#pragma once
#include <cstdint>

namespace fiber::detail {

inline constexpr const char* env_claim_copy_port = "FIBER_CLAIM_COPY_PORT";
inline constexpr const char* env_claim_copy_token_file = "FIBER_CLAIM_COPY_TOKEN_FILE";
inline constexpr const char* env_claim_copy_root = "FIBER_CLAIM_COPY_ROOT";
inline constexpr const char* claim_copy_token_header = "X-Fiber-Copy-Token";
inline constexpr std::uint16_t claim_copy_port = 7470;
/// The line the service prints once it listens (the command waits for it in the pod's log).
inline constexpr const char* claim_copy_ready_line = "fiber: serving the claim for fiber cp";
/// It ends by itself after this long without a request (the command that started it is gone).
inline constexpr int claim_copy_idle_seconds = 600;

/// Whether this process was started as the claim copy service.
bool is_claim_copy_service() noexcept;
/// Serves until idle; the process's exit code (2 when it was started without a token or port).
int serve_claim_copies();

}  // namespace fiber::detail
