#include "core/recording_folder.hpp"

#include <dirent.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <system_error>
#include <utility>
#include <vector>

#include "core/flight_recorder.hpp"

namespace fiber::detail {

namespace fs = std::filesystem;

namespace {
/// `program` as a file name may carry it: no '/' (nor NUL), at most max_program_bytes, not cut
/// inside a UTF-8 character.
std::string program_for_name(std::string_view program) {
  std::string out(program.substr(0, max_program_bytes));
  if (out.size() < program.size())
    while (!out.empty() && (static_cast<unsigned char>(program[out.size()]) & 0xC0) == 0x80) out.pop_back();
  for (auto& c : out)
    if (c == '/' || c == '\0') c = '_';
  return out;
}

/// The program an earlier version's recording belongs to: its first record's (run_begin) text up
/// to the tab. "" when the file has no such header (one just being made, or not a recording).
std::string program_of_run(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  char head[sizeof flight_magic + sizeof(flight_record) + 256] = {};
  in.read(head, sizeof head);
  auto got = static_cast<std::size_t>(in.gcount());
  if (got < sizeof flight_magic + sizeof(flight_record) || std::memcmp(head, flight_magic, sizeof flight_magic) != 0)
    return {};
  flight_record r;
  std::memcpy(&r, head + sizeof flight_magic, sizeof r);
  if (r.kind != record_kind::run_begin) return {};
  std::string_view text(head + sizeof flight_magic + sizeof r,
                        std::min<std::size_t>(r.text_size, got - sizeof flight_magic - sizeof r));
  return std::string(text.substr(0, text.find('\t')));
}
}  // namespace

std::string recording_file_name(std::string_view utc_stamp, std::string_view run_id, std::string_view program) {
  auto name = program_for_name(program);
  if (name.empty()) name = "?";
  std::string out;
  out.reserve(utc_stamp.size() + run_id.size() + name.size() + flight_suffix.size() + 2);
  out.append(utc_stamp).append("-").append(run_id).append("@").append(name).append(flight_suffix);
  return out;
}

std::optional<recording_name> parse_recording_name(std::string_view filename) {
  if (!filename.ends_with(flight_suffix)) return std::nullopt;
  auto stem = filename.substr(0, filename.size() - flight_suffix.size());
  auto dash = stem.find('-');
  if (dash == std::string_view::npos) return recording_name{std::string(stem), {}};
  auto rest = stem.substr(dash + 1);
  auto at = rest.find('@');
  if (at == std::string_view::npos) return recording_name{std::string(rest), {}};
  return recording_name{std::string(rest.substr(0, at)), std::string(rest.substr(at + 1))};
}

// The newest `keep` runs of each program stay: the runs of other programs (a test suite, a sweep
// of short jobs) never push out a user's, however many they make. The oldest go first: the names
// begin with the UTC time the run began. Read with readdir, names only: this runs at every run's
// start, over a folder that may hold thousands of recordings.
void keep_newest(const fs::path& folder, int keep) {
  // Listed whole before anything is renamed: a listing read in blocks would show a file renamed
  // meanwhile again, under its new name.
  std::vector<std::string> listed;
  if (DIR* d = ::opendir(folder.c_str())) {
    while (auto* e = ::readdir(d)) {
      std::string_view name(e->d_name);
      if (name.ends_with(flight_suffix)) listed.emplace_back(name);
    }
    ::closedir(d);
  }
  std::vector<std::pair<std::string, std::string>> runs;  // program, file name
  runs.reserve(listed.size());
  for (auto& file : listed) {
    auto name = parse_recording_name(file);
    if (!name) continue;
    if (name->program.empty()) {  // an earlier version's: renamed once to say its program
      auto program = program_for_name(program_of_run(folder / file));
      if (!program.empty()) {
        auto renamed = file.substr(0, file.size() - flight_suffix.size()) + "@" + program + std::string(flight_suffix);
        std::error_code moved;
        fs::rename(folder / file, folder / renamed, moved);
        if (!moved) file = std::move(renamed);  // else another run renamed it, or it went
      }
      runs.emplace_back(std::move(program), std::move(file));
      continue;
    }
    runs.emplace_back(std::move(name->program), std::move(file));
  }
  std::sort(runs.begin(), runs.end());  // by program, then oldest first
  std::error_code ec;
  for (std::size_t first = 0; first < runs.size();) {
    auto last = first;
    while (last < runs.size() && runs[last].first == runs[first].first) ++last;
    for (auto i = first; i + keep < last; ++i) fs::remove(folder / runs[i].second, ec);  // another run may have taken it
    first = last;
  }
}

}  // namespace fiber::detail
