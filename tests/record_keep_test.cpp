// What stays in a recording folder: nothing when the recorder is off, and each program's newest
// record_keep runs, whatever other programs recorded there.
#include <fiber/history.hpp>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <set>

#include "core/flight_recorder.hpp"
#include "record_folder.hpp"

namespace {
using fiber::detail::flight_recorder;
using fiber::detail::record_kind;

/// A recording another program made in `dir` (its first record names it), begun at `stamp`.
void recorded_by_another_program(const record_folder& dir, const std::string& stamp, const std::string& id) {
  std::filesystem::create_directories(dir.path);
  std::ofstream out(dir.path / (stamp + "-" + id + std::string(fiber::detail::flight_suffix)), std::ios::binary);
  std::string text = "other_program\tlocal";
  fiber::detail::flight_record r{.kind = record_kind::run_begin};
  r.text_size = static_cast<std::uint16_t>(text.size());
  out.write(fiber::detail::flight_magic, sizeof fiber::detail::flight_magic);
  out.write(reinterpret_cast<const char*>(&r), sizeof r);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}
}  // namespace

TEST(record_keep, off_records_nothing_and_the_newest_record_keep_runs_stay) {
  record_folder dir("keep");
  {
    flight_recorder rec;
    rec.open(dir.cfg({{"record", "false"}}), "off");
    EXPECT_FALSE(rec.on());
    rec.record(record_kind::task_sent, 1, 1, 1, 1);
  }
  EXPECT_TRUE(dir.files().empty());
  for (int i = 0; i < 5; ++i) {
    flight_recorder rec;
    rec.open(dir.cfg({{"record_keep", "3"}}), "keep" + std::to_string(i));
    // The names begin with the second the run began: a second apart, or the same second and then
    // by id, which these ids order as made.
  }
  auto runs = fiber::run_history(dir.cfg());
  ASSERT_EQ(runs.size(), 3u);
  std::set<std::string> ids;
  for (auto& r : runs) ids.insert(r.id);
  EXPECT_EQ(ids, (std::set<std::string>{"keep2", "keep3", "keep4"}));
  EXPECT_TRUE(runs[0].ended);
}

// Three runs of another program, older than this one's: this program's runs past record_keep
// go, and the other's keep their own newest record_keep (all of them went when the folder was
// counted as one).
TEST(record_keep, the_runs_of_another_program_do_not_push_out_this_ones) {
  record_folder dir("per-program");
  for (int i = 0; i < 3; ++i) recorded_by_another_program(dir, "20000101T00000" + std::to_string(i) + "Z", "other" + std::to_string(i));
  for (int i = 0; i < 3; ++i) {
    flight_recorder rec;
    rec.open(dir.cfg({{"record_keep", "2"}}), "mine" + std::to_string(i));
  }
  std::set<std::string> ids;
  for (auto& r : fiber::run_history(dir.cfg())) ids.insert(r.id);
  EXPECT_EQ(ids, (std::set<std::string>{"mine1", "mine2", "other1", "other2"}));
}
