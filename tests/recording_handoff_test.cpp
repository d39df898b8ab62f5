// A master's recording handed to the `fiber run` that follows it (runtime/observe/recording_handoff): the
// line it prints and what reads it, the file served once to the token's holder, and a master that
// gives up when nobody comes. The whole path through a real cluster's pod proxy is
// cli_kubernetes_test's.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "http_support.hpp"
#include "runtime/observe/recording_handoff.hpp"
#include "run_folder.hpp"

namespace {
namespace fs = std::filesystem;
using fiber::detail::handoff_offer;

/// A recording's stand-in: bytes of every value, newlines and NULs among them.
std::string some_bytes(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7919) & 0xff);
  return s;
}

fs::path write_file(const std::string& name, const std::string& bytes) {
  auto p = fiber_test::run_folder() / (name + "-" + std::to_string(::getpid()) + ".fiberrec");
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

fiber::detail::http_response get(std::uint16_t port, const std::string& target) {
  fiber::detail::http_request req;
  req.url = "http://127.0.0.1:" + std::to_string(port) + target;
  return fiber_test::http_call(std::move(req));
}
}  // namespace

TEST(recording_handoff, its_line_reads_back_and_other_lines_are_not_offers) {
  handoff_offer offer{"20261127T101500Z-abc123.fiberrec", 81234, 40123};
  auto read = fiber::detail::handoff_in_line(fiber::detail::handoff_line(offer));
  ASSERT_TRUE(read);
  EXPECT_EQ(read->file, offer.file);
  EXPECT_EQ(read->bytes, offer.bytes);
  EXPECT_EQ(read->port, offer.port);
  EXPECT_FALSE(fiber::detail::handoff_in_line("Pi is roughly 3.14"));
  EXPECT_FALSE(fiber::detail::handoff_in_line("x " + fiber::detail::handoff_line(offer)));  // a whole line only
  offer.file = "../../etc/passwd";  // a name, never a path to write elsewhere
  EXPECT_FALSE(fiber::detail::handoff_in_line(fiber::detail::handoff_line(offer)));
  offer.file = "f.fiberrec";
  offer.port = 0;
  EXPECT_FALSE(fiber::detail::handoff_in_line(fiber::detail::handoff_line(offer)));
}

// The file goes whole to the token's holder only, once; then the master goes on.
TEST(recording_handoff, the_file_goes_whole_to_the_tokens_holder_and_the_master_goes_on) {
  auto bytes = some_bytes(300000);
  auto path = write_file("whole", bytes);
  std::promise<handoff_offer> announced;
  auto taken = std::async(std::launch::async, [&] {
    return fiber::detail::hand_off_recording(path.string(), "right-token", std::chrono::minutes(5),
                                             [&](const handoff_offer& o) { announced.set_value(o); });
  });
  auto offer = announced.get_future().get();
  EXPECT_EQ(offer.file, path.filename().string());
  EXPECT_EQ(offer.bytes, bytes.size());
  auto wrong = get(offer.port, "/recording?token=wrong-token");
  EXPECT_EQ(wrong.status, 403);
  EXPECT_EQ(get(offer.port, "/elsewhere?token=right-token").status, 403);
  auto right = get(offer.port, "/recording?token=right-token");
  EXPECT_EQ(right.status, 200);
  EXPECT_TRUE(right.body == bytes) << right.body.size() << " bytes came";
  EXPECT_TRUE(taken.get());  // it returned once the file was taken, long before its patience
  fs::remove(path);
}

// Nobody comes: after its patience the master goes on, and says the file was not taken.
TEST(recording_handoff, nobody_comes_and_the_master_goes_on_after_its_patience) {
  auto path = write_file("untaken", some_bytes(1000));
  bool announced = false;
  EXPECT_FALSE(fiber::detail::hand_off_recording(path.string(), "a-token", std::chrono::milliseconds(50),
                                                 [&](const handoff_offer&) { announced = true; }));
  EXPECT_TRUE(announced);
  fs::remove(path);
}

// No recording (recording off, or none written): nothing is offered.
TEST(recording_handoff, no_file_no_offer) {
  bool announced = false;
  EXPECT_FALSE(fiber::detail::hand_off_recording((fiber_test::run_folder() / "none.fiberrec").string(), "t",
                                                 std::chrono::minutes(5), [&](const handoff_offer&) { announced = true; }));
  EXPECT_FALSE(announced);
}
