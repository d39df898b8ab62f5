// The recording folder's names and bound: a file's name says its program, so the bound never opens
// a file named by this version; an earlier version's files are renamed once, inside the folder
// whatever their first record says.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

#include "core/flight_recorder.hpp"
#include "core/recording_folder.hpp"
#include "record_folder.hpp"

namespace {
using fiber::detail::keep_newest;
using fiber::detail::parse_recording_name;
using fiber::detail::recording_file_name;

std::set<std::string> names_in(const record_folder& dir) {
  std::set<std::string> out;
  for (auto& f : dir.files()) out.insert(f.filename().string());
  return out;
}

/// A file named `name` in `dir` holding `bytes`.
void file(const record_folder& dir, const std::string& name, const std::string& bytes) {
  std::filesystem::create_directories(dir.path);
  std::ofstream(dir.path / name, std::ios::binary) << bytes;
}

/// An earlier version's recording: named without its program, which its first record says.
void earlier_recording(const record_folder& dir, const std::string& stem, const std::string& program) {
  std::string text = program + "\tlocal";
  fiber::detail::flight_record r{.kind = fiber::detail::record_kind::run_begin};
  r.text_size = static_cast<std::uint16_t>(text.size());
  std::string bytes(fiber::detail::flight_magic, sizeof fiber::detail::flight_magic);
  bytes.append(reinterpret_cast<const char*>(&r), sizeof r);
  bytes.append(text);
  file(dir, stem + ".fiberrec", bytes);
}
}  // namespace

TEST(recording_folder, a_name_says_the_run_and_its_program_and_reads_back) {
  EXPECT_EQ(recording_file_name("20261201T101258Z", "my-run.2", "pi_estimation"),
            "20261201T101258Z-my-run.2@pi_estimation.fiberrec");
  auto name = parse_recording_name("20261201T101258Z-my-run.2@pi_estimation.fiberrec");
  ASSERT_TRUE(name);
  EXPECT_EQ(name->id, "my-run.2");
  EXPECT_EQ(name->program, "pi_estimation");
  // An earlier version's name: the id, and no program.
  name = parse_recording_name("20261201T101258Z-my-run.2.fiberrec");
  ASSERT_TRUE(name);
  EXPECT_EQ(name->id, "my-run.2");
  EXPECT_EQ(name->program, "");
  EXPECT_FALSE(parse_recording_name("notes.txt"));
}

TEST(recording_folder, a_program_name_stays_one_file_name_cut_at_a_whole_character) {
  EXPECT_EQ(recording_file_name("S", "id", "../up"), "S-id@.._up.fiberrec");
  EXPECT_EQ(recording_file_name("S", "id", ""), "S-id@?.fiberrec");
  // 95 ASCII bytes, then a two-byte character that would straddle the cut: it goes whole.
  std::string program(95, 'p');
  program += "\xC3\xA9tail";
  auto name = parse_recording_name(recording_file_name("S", "id", program));
  ASSERT_TRUE(name);
  EXPECT_EQ(name->program, std::string(95, 'p'));
}

// Files whose contents are not recordings at all, named for two programs: grouped by their names
// (three each, all kept under keep 3). Grouped by their contents, the six would have been one
// group of unknown program and three would have gone.
TEST(recording_folder, the_bound_groups_by_the_name_without_reading_the_files) {
  record_folder dir("by-name");
  for (int i = 0; i < 3; ++i) {
    file(dir, recording_file_name("2026010" + std::to_string(i) + "T000000Z", "p" + std::to_string(i), "p"), "x");
    file(dir, recording_file_name("2026010" + std::to_string(i) + "T000000Z", "q" + std::to_string(i), "q"), "x");
  }
  keep_newest(dir.path, 3);
  EXPECT_EQ(names_in(dir).size(), 6u);
  keep_newest(dir.path, 2);
  EXPECT_EQ(names_in(dir), (std::set<std::string>{
                               "20260101T000000Z-p1@p.fiberrec", "20260102T000000Z-p2@p.fiberrec",
                               "20260101T000000Z-q1@q.fiberrec", "20260102T000000Z-q2@q.fiberrec"}));
}

TEST(recording_folder, an_earlier_versions_files_are_renamed_for_their_program_and_bounded_with_it) {
  record_folder dir("earlier");
  for (int i = 0; i < 3; ++i) earlier_recording(dir, "2000010" + std::to_string(i) + "T000000Z-old" + std::to_string(i), "old_program");
  file(dir, recording_file_name("20261201T000000Z", "new", "old_program"), "x");
  keep_newest(dir.path, 3);
  EXPECT_EQ(names_in(dir), (std::set<std::string>{"20000101T000000Z-old1@old_program.fiberrec",
                                                  "20000102T000000Z-old2@old_program.fiberrec",
                                                  "20261201T000000Z-new@old_program.fiberrec"}));
  // Renamed, each still reads as the run it was.
  auto name = parse_recording_name("20000101T000000Z-old1@old_program.fiberrec");
  EXPECT_EQ(name->id, "old1");
}

// A first record naming a program with '/' in it cannot move the file out of the folder.
TEST(recording_folder, a_renamed_file_stays_in_the_folder_whatever_its_first_record_says) {
  record_folder dir("escape");
  earlier_recording(dir, "20000101T000000Z-old", "../../escaped");
  keep_newest(dir.path, 5);
  EXPECT_EQ(names_in(dir), (std::set<std::string>{"20000101T000000Z-old@.._.._escaped.fiberrec"}));
  EXPECT_FALSE(std::filesystem::exists(dir.path.parent_path() / "escaped.fiberrec"));
  EXPECT_FALSE(std::filesystem::exists(dir.path.parent_path().parent_path() / "escaped.fiberrec"));
}

// Renaming while the folder is listed may show a renamed file again under its new name (the
// listing is read in blocks: past the first, it sees the renames): counted twice, runs within the
// bound would go. Every one of many stays.
TEST(recording_folder, renaming_an_earlier_versions_files_loses_none_within_the_bound) {
  record_folder dir("many");
  const int runs = 2000;
  for (int i = 0; i < runs; ++i) earlier_recording(dir, "20000101T000000Z-old" + std::to_string(10000 + i), "old_program");
  keep_newest(dir.path, runs);
  auto names = names_in(dir);
  EXPECT_EQ(names.size(), static_cast<std::size_t>(runs));
  for (auto& n : names) EXPECT_TRUE(n.ends_with("@old_program.fiberrec")) << n;
}
