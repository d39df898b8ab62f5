// A file, a folder with everything under it, or a symbolic link, packed into one byte string and
// unpacked elsewhere: what `fiber cp` sends to and from the helper that serves a claim on
// Kubernetes (runtime/claim_copy_service). Both ends are fiber's, so no tar is needed in any image.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace fiber::detail {

/// `local` with everything under it: each entry's kind, permission bits, path below `local` ("" for
/// `local` itself) and content (a link's target). Folders come before what they hold. Sockets,
/// devices and FIFOs are skipped. fiber::error(config_error) naming what cannot be read, and
/// (too_large) once the packed size would pass `max_bytes`.
std::string pack_tree(const std::filesystem::path& local, std::uint64_t max_bytes);

/// Writes a packed tree under `parent` as `top` (a folder merges with one already there, a file
/// replaces one). Paths that would leave `parent/top` ("..", absolute, through a link) are
/// refused, and links are made last, so none of the tree's own links is written through.
/// Returns the number of entries written. fiber::error(malformed_message) for bytes that are no
/// packed tree, (config_error) naming what could not be written.
std::size_t unpack_tree(std::string_view packed, const std::filesystem::path& parent, const std::string& top);

}  // namespace fiber::detail
