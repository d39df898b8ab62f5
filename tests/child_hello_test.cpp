// A child's hello judged on its own, from bytes made here: the one-time word first (a process that
// links with a sibling's id is refused before anything else is read), then the protocol and the
// build; what an accepted child says of itself is kept.
#include "primitives/child_hello.hpp"

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "core/build_id.hpp"
#include "fiber/registry.hpp"
#include "runtime/protocol.hpp"

namespace {
using namespace fiber::detail;

boost::json::object good_hello() {
  return {{"nonce", "the-word"},
          {"protocol", protocol_version},
          {"build_id", build_id()},
          {"registry", std::to_string(registry_digest())},
          {"executable", executable_path()},
          {"host", "node-2"},
          {"memory_domain", "node-2/4026531836"},
          {"pid", 4242}};
}

child_hello judge(const boost::json::object& o) {
  return read_child_hello(boost::json::serialize(o), "the-word", "Process-1");
}

TEST(child_hello, the_child_that_says_its_word_in_the_masters_build_is_welcomed_and_heard) {
  auto h = judge(good_hello());
  EXPECT_TRUE(h.problem.empty()) << h.problem;
  EXPECT_EQ(h.host, "node-2");
  EXPECT_EQ(h.memory_domain, "node-2/4026531836");
  EXPECT_EQ(h.pid, 4242);
}

TEST(child_hello, another_word_or_none_is_refused_before_anything_else_is_read) {
  for (auto word : {"another-word", ""}) {
    auto o = good_hello();
    o["nonce"] = word;
    o["protocol"] = 0;  // wrong too: the word is judged first
    auto h = judge(o);
    EXPECT_EQ(h.code, fiber::errc::protocol_error);
    EXPECT_NE(h.problem.find("did not say the one-time word its master gave Process-1"), std::string::npos) << h.problem;
    EXPECT_TRUE(h.host.empty() && !h.pid) << "nothing it said is kept";
  }
  auto o = good_hello();
  o.erase("nonce");
  EXPECT_NE(judge(o).problem.find("one-time word"), std::string::npos);
}

TEST(child_hello, another_protocol_is_refused_naming_both_versions) {
  auto o = good_hello();
  o["protocol"] = protocol_version + 1;
  auto h = judge(o);
  EXPECT_EQ(h.code, fiber::errc::protocol_error);
  EXPECT_NE(h.problem.find("worker speaks protocol " + std::to_string(protocol_version + 1)), std::string::npos) << h.problem;
}

TEST(child_hello, another_build_is_refused_as_a_binary_mismatch_naming_the_fix) {
  auto o = good_hello();
  o["build_id"] = "0000";
  auto h = judge(o);
  EXPECT_EQ(h.code, fiber::errc::binary_mismatch);
  EXPECT_NE(h.problem.find("run the same build in workers"), std::string::npos) << h.problem;
}

TEST(child_hello, bytes_that_are_no_json_object_are_refused) {
  for (auto text : {"not json", "[1, 2]", ""}) {
    auto h = read_child_hello(text, "the-word", "Process-1");
    EXPECT_NE(h.problem.find("unreadable hello"), std::string::npos) << text << ": " << h.problem;
  }
}

}  // namespace
