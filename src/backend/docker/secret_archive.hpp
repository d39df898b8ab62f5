// A container's credentials, placed by the engine into the created container before it starts
// (PUT /containers/{id}/archive): `docker inspect` shows a container's environment to anyone in
// the docker group, never the files in it.
#pragma once
#include <string>
#include <string_view>

namespace fiber::detail {

/// Where the worker finds them, inside the container.
inline constexpr const char* container_keys_folder = "/.fiber-keys";
inline constexpr const char* container_keys_file = "/.fiber-keys/keys";

/// A tar archive (POSIX ustar) of the folder `.fiber-keys` (0700) holding the file `keys` (0400)
/// with `text`, both owned by `uid`:`gid` (the container's user; the engine keeps an archive's
/// owners), to extract at "/".
std::string secret_archive(std::string_view text, unsigned uid, unsigned gid);

}  // namespace fiber::detail
