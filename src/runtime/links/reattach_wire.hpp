// What both ends of a reattach agree on (runtime/links/reattach_point, a durable run's worker
// whose master died; runtime/links/reattach_dial, the master that takes the run up): who greets,
// the proofs each side gives of the worker's secret, and the bounds on what follows them.
//
//   worker  -> master  "fiber reattach 2" (16 bytes), its challenge (32 random bytes)
//   master  -> worker  its challenge (32), HMAC-SHA256(secret, "master" | worker's | master's)
//   worker  -> master  HMAC-SHA256(secret, "worker" | master's | worker's), u32 n, n bytes: what it
//                      holds, sealed
//   master  -> worker  u32 n, n bytes: where to link again, sealed (empty inside: leave)
//
// Each side proves the secret before the other reads a byte it did not size itself: on a unix
// socket a process of another user is refused by its credentials first (SO_PEERCRED), and anyone
// that does not know the secret gets nothing but a challenge. Both challenges enter both proofs,
// so a proof seen once answers nothing later. What follows the proofs is sealed (AES-256-GCM under
// a key of this session: HMAC-SHA256(secret, "key" | worker's | master's)), so a point reached
// over a network (TCP, a cluster's workers) tells nothing to one on the path, and a byte changed
// on the way is refused: the record holds the new master's address and the worker's credentials.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fiber::detail {

inline constexpr std::string_view reattach_greeting = "fiber reattach 2";
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
/// The key that seals what follows the proofs in one session.
reattach_proof reattach_key(std::string_view secret, const reattach_challenge& workers, const reattach_challenge& masters);
/// Which way a sealed message goes: each direction seals once per session, under its own nonce.
enum class reattach_way : unsigned char { to_master = 1, to_worker = 2 };
/// What a seal adds to its text (GCM's tag).
inline constexpr std::size_t reattach_seal_bytes = 16;
/// `text` sealed under `key` for `way`: its ciphertext and tag.
std::string reattach_seal(const reattach_proof& key, reattach_way way, std::string_view text);
/// The text of `sealed`; false when it was not sealed under `key` for `way` (changed on the way,
/// or by someone without the key).
bool reattach_unseal(const reattach_proof& key, reattach_way way, std::string_view sealed, std::string& text);
/// Whether `a` equals `b`, in a time that does not depend on where they differ.
bool reattach_same(const reattach_proof& a, const reattach_proof& b) noexcept;
/// 32 bytes from the kernel's random source.
reattach_challenge reattach_random();

/// Reads exactly `n` bytes; false on an error, the end, or the socket's receive timeout.
bool read_all(int fd, void* to, std::size_t n) noexcept;
/// Writes all of `bytes`; false on an error.
bool write_all(int fd, std::string_view bytes) noexcept;

}  // namespace fiber::detail
