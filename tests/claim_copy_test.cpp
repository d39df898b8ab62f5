// fiber cp's arguments: which side is a claim, and where the copy lands (src/cli/claim_copy).
#include <gtest/gtest.h>

#include <filesystem>

#include <boost/json.hpp>

#include "cli/claim_copy.hpp"
#include "cli/kubernetes_claim_copy.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
using fiber::cli::parse_claim_path;
using fiber::cli::plan_copy;

TEST(claim_copy, a_claim_is_a_name_then_a_colon_and_anything_else_is_local) {
  auto c = parse_claim_path("results:/logs/a");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->claim, "results");
  EXPECT_EQ(c->path, "/logs/a");
  EXPECT_EQ(parse_claim_path("data.v2:x")->claim, "data.v2");
  EXPECT_FALSE(parse_claim_path("./a:b"));
  EXPECT_FALSE(parse_claim_path("/abs/a:b"));
  EXPECT_FALSE(parse_claim_path("no colon"));
  EXPECT_FALSE(parse_claim_path("sp ace:x"));
  EXPECT_FALSE(parse_claim_path(":x"));
}

TEST(claim_copy, an_upload_takes_the_destinations_name_or_goes_into_a_folder_ending_in_a_slash) {
  auto dir = fiber_test::run_folder() / "claim_copy_up";
  fs::create_directories(dir / "src");
  auto as = plan_copy((dir / "src").string(), "c:/a/b");
  EXPECT_TRUE(as.upload);
  EXPECT_EQ(as.claim, "c");
  EXPECT_EQ(as.in_claim, "a/b");
  EXPECT_EQ(plan_copy((dir / "src").string(), "c:/a/b/").in_claim, "a/b/src");
  EXPECT_EQ(plan_copy((dir / "src").string(), "c:").in_claim, "src");
  EXPECT_EQ(plan_copy((dir / "src").string() + "/", "c:/./x/").in_claim, "x/src");
}

TEST(claim_copy, a_download_lands_in_an_existing_folder_or_under_the_destinations_name) {
  auto dir = fiber_test::run_folder() / "claim_copy_down";
  fs::create_directories(dir);
  auto into = plan_copy("c:/logs/run1", dir.string());
  EXPECT_FALSE(into.upload);
  EXPECT_EQ(into.in_claim, "logs/run1");
  EXPECT_EQ(into.local_parent, dir);
  EXPECT_EQ(into.local_name, "run1");
  auto as = plan_copy("c:/logs/run1", (dir / "renamed").string());
  EXPECT_EQ(as.local_parent, dir);
  EXPECT_EQ(as.local_name, "renamed");
  auto all = plan_copy("c:/", dir.string() + "/");
  EXPECT_EQ(all.in_claim, "");
  EXPECT_EQ(all.local_name, "c");
}

TEST(claim_copy, bad_arguments_are_errors_that_say_what_to_write) {
  fiber_test::expect_error([] { plan_copy("a:/x", "b:/y"); }, fiber::errc::config_error, "not between claims");
  fiber_test::expect_error([] { plan_copy("here", "there"); }, fiber::errc::config_error, "one side as CLAIM:PATH");
  fiber_test::expect_error([] { plan_copy("c:/../etc", "out"); }, fiber::errc::config_error, "leaves its claim");
  fiber_test::expect_error([] { plan_copy("/nonexistent/file", "c:/x"); }, fiber::errc::config_error,
                           "no such file or folder here");
}

// A reader of the namespace sees the helper pod's spec: it names where the token is, never the
// token, which is in a Secret of the pod's name (view does not read Secrets).
TEST(claim_copy, the_helper_pods_spec_holds_no_token_and_mounts_the_secret_that_does) {
  fiber::cli::helper_pod_settings s;
  s.name = "fiber-cp-1234";
  s.image = "img";
  s.program = "/opt/prog";
  s.claim = "results";
  s.token = "0123456789abcdef0123456789abcdef-never-in-the-spec";
  auto pod = boost::json::serialize(fiber::cli::helper_pod_manifest(s));
  EXPECT_EQ(pod.find("never-in-the-spec"), std::string::npos) << pod;
  EXPECT_NE(pod.find(R"("FIBER_CLAIM_COPY_TOKEN_FILE","value":"/var/run/fiber-cp/token")"), std::string::npos) << pod;
  EXPECT_NE(pod.find(R"("secret":{"secretName":"fiber-cp-1234")"), std::string::npos) << pod;
  auto secret = fiber::cli::token_secret_manifest(s);
  EXPECT_EQ(secret.at("metadata").at("name"), "fiber-cp-1234");
  EXPECT_EQ(secret.at("stringData").at("token").as_string(), s.token);
}
