// The durable run's journal format on its own, on real files: records come back as written once
// synced, a torn tail (a master killed mid-write, a flipped byte, a size no record has) is read up
// to the last whole record and cut when the journal is opened again, the bound is an error naming
// the key, the file is the user's alone, and one master at a time writes it.
#include "core/run_journal.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <future>
#include <memory>
#include <sys/resource.h>

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

TEST(run_journal, a_large_record_is_written_from_the_callers_bytes_by_the_writers_thread_and_said_durable) {
  auto p = journal_path("referenced");
  journal_writer w(p, 4 << 20);
  w.append(rec(1, 0, "small"));
  // The caller's bytes, which the writer keeps alive until written: no copy of them here.
  auto big = std::make_shared<std::string>(std::size_t{200} << 10, 'r');
  (*big)[17] = 'x';
  std::string_view parts[] = {std::string_view(*big).substr(0, 1000), std::string_view(*big).substr(1000)};
  w.append(3, 2, 5, 9, parts, big);
  std::weak_ptr<std::string> kept = big;
  big.reset();  // the writer's now, until written
  auto expected = w.bytes();
  std::promise<std::pair<std::uint64_t, std::exception_ptr>> told;
  w.sync_soon([&](std::uint64_t upto, std::exception_ptr failed) { told.set_value({upto, failed}); });
  auto [upto, failed] = told.get_future().get();
  EXPECT_FALSE(failed);
  EXPECT_EQ(upto, expected);
  EXPECT_EQ(w.pending(), 0u);
  EXPECT_TRUE(kept.expired()) << "the writer still holds bytes it wrote";
  auto j = read_journal(p);
  ASSERT_EQ(j.records.size(), 2u);
  EXPECT_EQ(j.whole_bytes, expected);
  EXPECT_EQ(j.records[1].kind, 3);
  EXPECT_EQ(j.records[1].index, 9u);
  ASSERT_EQ(j.records[1].payload.size(), std::size_t{200} << 10);
  EXPECT_EQ(j.records[1].payload[17], 'x');
}

TEST(run_journal, a_write_the_disk_refuses_keeps_the_records_for_the_next_sync_and_the_file_whole) {
  auto p = journal_path("refused");
  journal_writer w(p, 4 << 20);
  w.append(rec(1, 0, "first"));
  w.sync();
  auto whole = read_journal(p).whole_bytes;
  // The kernel refuses writes past RLIMIT_FSIZE (EFBIG once SIGXFSZ is ignored): a full disk as
  // far as the writer can tell.
  struct sigaction ignore{}, before{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &before), 0);
  rlimit limit{}, old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  limit = old;
  limit.rlim_cur = whole + 100;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  w.append(rec(1, 1, std::string(300, 'a')));
  auto big = std::make_shared<std::string>(std::size_t{100} << 10, 'b');
  std::string_view part(*big);
  w.append(1, 2, 5, 2, std::span<const std::string_view>(&part, 1), big);
  std::string why;
  try {
    w.sync();
  } catch (const fiber::error& e) {
    why = e.code() == fiber::errc::journal_failed ? e.what() : "another error";
  }
  // The writer's thread, woken by the large record, may still be trying: its round told, it
  // has none left (a failing writer wakes only when asked).
  std::promise<std::exception_ptr> told;
  w.sync_soon([&](std::uint64_t, std::exception_ptr failed) { told.set_value(failed); });
  bool thread_failed = told.get_future().get() != nullptr;
  auto pending = w.pending();
  auto cut = read_journal(p);
  // What the test says goes to a file that limit would refuse too: said once it is lifted.
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  ASSERT_EQ(::sigaction(SIGXFSZ, &before, nullptr), 0);
  EXPECT_NE(why.find(p.string()), std::string::npos) << "sync: " << (why.empty() ? "no error" : why);
  EXPECT_TRUE(thread_failed) << "the thread's sync took a refused write as written";
  EXPECT_GT(pending, 0u);
  EXPECT_FALSE(cut.torn) << "the file holds part of a record";
  EXPECT_EQ(cut.records.size(), 1u);
  w.append(rec(1, 3, "after"));
  w.sync();
  auto j = read_journal(p);
  ASSERT_EQ(j.records.size(), 4u);
  EXPECT_FALSE(j.torn);
  for (std::uint64_t i = 0; i < 4; ++i) EXPECT_EQ(j.records[i].index, i) << "in the order appended";
  EXPECT_EQ(j.records[2].payload.size(), std::size_t{100} << 10);
}

TEST(run_journal, a_journal_that_does_not_exist_reads_as_empty) {
  auto j = read_journal(journal_path("absent"));
  EXPECT_TRUE(j.records.empty());
  EXPECT_FALSE(j.torn);
}

}  // namespace
