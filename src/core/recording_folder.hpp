// The folder runs are recorded in: what a recording's file is named, and the folder's bound (each
// program's newest record_keep recordings). A file's name carries its program, so bounding the
// folder when a run starts lists it without opening a file: a folder of 2,000 recordings opened
// one by one cost a short program's start about as much as the rest of it.
//
// Name: <UTC start>-<run id>@<program>.fiberrec. A run id has no '@' (config's run_id is letters,
// digits, '.', '_' and '-'); the program is its file's name, with any '/' made '_' and cut to
// max_program_bytes. Names without the '@' are an earlier version's: their program is in their
// first record, read once, and the file is renamed to say it.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace fiber::detail {

/// What a recording's file name says.
struct recording_name {
  std::string id;       // the run's id
  std::string program;  // empty: the name is an earlier version's and does not say
};

/// The file name of run `run_id` of `program`, begun at `utc_stamp`.
std::string recording_file_name(std::string_view utc_stamp, std::string_view run_id, std::string_view program);
/// What `filename` (no folder) says; nullopt when it is not a recording's name.
std::optional<recording_name> parse_recording_name(std::string_view filename);

/// The newest `keep` recordings of each program in `folder` stay; older ones are removed (another
/// run may have removed them first). Files named by an earlier version are renamed first.
void keep_newest(const std::filesystem::path& folder, int keep);

/// The longest program name a file name carries.
inline constexpr std::size_t max_program_bytes = 96;

}  // namespace fiber::detail
