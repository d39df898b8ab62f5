// What both ends of a reattach agree on (runtime/links/reattach_point, a durable run's worker
// whose master died; runtime/links/reattach_dial, the master that takes the run up): who greets,
// the proofs each side gives of the worker's secret, and the bounds on what follows them.
//
//   worker  -> master  "fiber reattach 1" (16 bytes), its challenge (32 random bytes)
//   master  -> worker  its challenge (32), HMAC-SHA256(secret, "master" | worker's | master's)
//   worker  -> master  HMAC-SHA256(secret, "worker" | master's | worker's), u32 n, n bytes: what it holds
//   master  -> worker  u32 n, n bytes (n <= record_limit): where to link again; n = 0: leave
//
// Each side proves the secret before the other reads a byte it did not size itself: a process of
// another user is refused by its credentials first (SO_PEERCRED), and one of the same user that
// does not know the secret gets nothing but a challenge. Both challenges enter both proofs, so a
// proof seen once answers nothing later.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fiber::detail {

inline constexpr std::string_view reattach_greeting = "fiber reattach 1";
static_assert(reattach_greeting.size() == 16);
inline constexpr std::size_t reattach_challenge_bytes = 32;
inline constexpr std::size_t reattach_proof_bytes = 32;
/// The most a new master's record may hold (its endpoint, a routing id, credentials).
inline constexpr std::size_t reattach_record_limit = std::size_t{64} * 1024;

using reattach_challenge = std::array<unsigned char, reattach_challenge_bytes>;
using reattach_proof = std::array<unsigned char, reattach_proof_bytes>;

/// HMAC-SHA256 under `secret` of `role` ("master" or "worker"), `first` and `second`.
reattach_proof reattach_prove(std::string_view secret, std::string_view role, const reattach_challenge& first,
                              const reattach_challenge& second);
/// Whether `a` equals `b`, in a time that does not depend on where they differ.
bool reattach_same(const reattach_proof& a, const reattach_proof& b) noexcept;
/// 32 bytes from the kernel's random source.
reattach_challenge reattach_random();

/// Reads exactly `n` bytes; false on an error, the end, or the socket's receive timeout.
bool read_all(int fd, void* to, std::size_t n) noexcept;
/// Writes all of `bytes`; false on an error.
bool write_all(int fd, std::string_view bytes) noexcept;

}  // namespace fiber::detail
