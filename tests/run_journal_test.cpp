// The durable run's journal format on its own, on real files: records come back as written once
// synced, a torn tail (a master killed mid-write, a flipped byte, a size no record has) is read up
// to the last whole record and cut when the journal is opened again, the bound is an error naming
// the key, the file is the user's alone, and one master at a time writes it.
#include "core/run_journal.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "fiber/error.hpp"
#include "run_folder.hpp"

namespace {
using namespace fiber::detail;

std::filesystem::path journal_path(const std::string& name) {
  return fiber_test::run_folder() / "journals" / (name + ".journal");
}

journal_record rec(std::uint8_t kind, std::uint64_t index, std::string payload) {
  return {kind, 2, 5, index, std::move(payload)};
}

void append_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::app) << bytes;
}

TEST(run_journal, records_come_back_as_written_once_synced_and_not_before) {
  auto p = journal_path("plain");
  {
    journal_writer w(p, 1 << 20);
    w.append(rec(1, 0, "sphere"));
    w.append(rec(2, 7, std::string("\0result\xff", 8)));
    EXPECT_TRUE(read_journal(p).records.empty());  // buffered
    EXPECT_GT(w.pending(), 0u);
    w.sync();
    EXPECT_EQ(w.pending(), 0u);
  }
  auto j = read_journal(p);
  ASSERT_EQ(j.records.size(), 2u);
  EXPECT_FALSE(j.torn);
  EXPECT_EQ(j.records[0].kind, 1);
  EXPECT_EQ(j.records[0].payload, "sphere");
  EXPECT_EQ(j.records[1].pool, 2u);
  EXPECT_EQ(j.records[1].call, 5u);
  EXPECT_EQ(j.records[1].index, 7u);
  EXPECT_EQ(j.records[1].payload, std::string("\0result\xff", 8));
  struct stat st{};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(p.parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(run_journal, a_torn_tail_is_read_up_to_the_last_whole_record_and_cut_on_reopening) {
  auto p = journal_path("torn");
  {
    journal_writer w(p, 1 << 20);
    w.append(rec(1, 0, "first"));
    w.append(rec(2, 1, "second"));
    w.sync();
  }
  auto whole = std::filesystem::file_size(p);
  append_bytes(p, std::string("\x40\x00\x00\x00\x12\x34", 6));  // a head cut short
  auto j = read_journal(p);
  EXPECT_EQ(j.records.size(), 2u);
  EXPECT_TRUE(j.torn);
  EXPECT_EQ(j.whole_bytes, whole);
  {
    journal_writer w(p, 1 << 20);  // cuts the tail, then appends after the last whole record
    w.append(rec(3, 2, "third"));
    w.sync();
  }
  j = read_journal(p);
  ASSERT_EQ(j.records.size(), 3u);
  EXPECT_FALSE(j.torn);
  EXPECT_EQ(j.records[2].payload, "third");
}

TEST(run_journal, a_flipped_byte_or_a_size_no_record_has_ends_the_whole_records_there) {
  auto p = journal_path("flipped");
  {
    journal_writer w(p, 1 << 20);
    for (int i = 0; i < 3; ++i) w.append(rec(2, i, "payload-" + std::to_string(i)));
    w.sync();
  }
  auto j = read_journal(p);
  ASSERT_EQ(j.records.size(), 3u);
  {
    // The second record's last payload byte flipped: its check no longer holds.
    auto at = j.whole_bytes / 3 * 2 - 1;
    std::fstream f(p, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(at));
    f.put('X');
  }
  j = read_journal(p);
  EXPECT_EQ(j.records.size(), 1u);
  EXPECT_TRUE(j.torn);

  auto q = journal_path("huge-size");
  // A head claiming a body of 4 GiB, and nothing after it: read as torn, nothing allocated for it.
  append_bytes(q, std::string("\xff\xff\xff\xff\0\0\0\0", 8));
  auto k = read_journal(q);
  EXPECT_TRUE(k.records.empty());
  EXPECT_TRUE(k.torn);
}

TEST(run_journal, growing_past_the_bound_is_an_error_naming_the_key_and_what_was_written_stays) {
  auto p = journal_path("bounded");
  journal_writer w(p, 100);
  w.append(rec(2, 0, "small"));
  try {
    w.append(rec(2, 1, std::string(200, 'x')));
    FAIL() << "an append past journal_max_bytes was taken";
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::journal_failed);
    EXPECT_NE(std::string(e.what()).find("journal_max_bytes"), std::string::npos) << e.what();
  }
  w.sync();
  EXPECT_EQ(read_journal(p).records.size(), 1u);
}

TEST(run_journal, a_journal_others_can_read_is_refused) {
  auto p = journal_path("shared");
  std::filesystem::create_directories(p.parent_path());
  append_bytes(p, "");
  std::filesystem::permissions(p, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                      std::filesystem::perms::group_read | std::filesystem::perms::others_read);
  try {
    journal_writer w(p, 1 << 20);
    FAIL() << "a world-readable journal was opened";
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::config_error);
    EXPECT_NE(std::string(e.what()).find("readable by it alone"), std::string::npos) << e.what();
  }
}

TEST(run_journal, a_second_writer_while_the_first_holds_the_journal_is_refused_and_the_first_goes_on) {
  auto p = journal_path("held");
  journal_writer first(p, 1 << 20);
  first.append(rec(1, 0, "before"));
  first.sync();
  try {
    journal_writer second(p, 1 << 20);
    FAIL() << "two writers held one journal";
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::config_error);
    EXPECT_NE(std::string(e.what()).find("held by another master"), std::string::npos) << e.what();
  }
  first.append(rec(1, 1, "after"));
  first.sync();
  auto j = read_journal(p);
  ASSERT_EQ(j.records.size(), 2u);
  EXPECT_EQ(j.records[1].payload, "after");
}

TEST(run_journal, a_journal_that_does_not_exist_reads_as_empty) {
  auto j = read_journal(journal_path("absent"));
  EXPECT_TRUE(j.records.empty());
  EXPECT_FALSE(j.torn);
}

}  // namespace
