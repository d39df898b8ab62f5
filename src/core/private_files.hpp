// Where a run keeps what only its user may read: its recordings, its jobs' output (which carries
// the dashboard's address with its token), the files a command takes from a run. On a shared host
// other users must not read them, so the folders fiber makes are 0700 and its files 0600 whatever
// the user's umask, and nothing falls back to a folder every user shares (/tmp) when HOME is unset.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace fiber::detail {

/// Makes `folder` and its missing parents, each one it makes 0700, and makes `folder` itself 0700
/// when this user owns it (a folder an earlier version made with the umask's bits). `ec` says why
/// it could not.
void make_private_folder(const std::filesystem::path& folder, std::error_code& ec);

/// Opens `path` for writing, made 0600 (O_CREAT | O_EXCL unless `replace`); -1 and errno when it
/// cannot.
int open_private_file(const std::filesystem::path& path, bool replace);

/// Writes `bytes` as the file `path` (made or replaced, 0600, never through a link); what failed
/// when it could not.
std::error_code write_private_file(const std::filesystem::path& path, std::string_view bytes);

/// $HOME/`below`; fiber::error(config_error) naming `setting` as the way to choose a folder when
/// HOME is unset or empty.
std::string home_folder(std::string_view below, std::string_view setting);

}  // namespace fiber::detail
