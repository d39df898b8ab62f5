// How a child takes its credentials (runtime/trust/worker_credentials): from the file its master named,
// once, leaving nothing in the environment for what it starts; a missing file is a clear error.
#include "runtime/trust/worker_credentials.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fiber/error.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
using fiber::detail::job_keys;
using fiber::detail::take_worker_credentials;

namespace {
class worker_credentials : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = fiber_test::run_folder() / ("worker_credentials_" + std::to_string(::getpid()));
    ::unsetenv("FIBER_WORKER_KEYS_FILE");
    ::unsetenv("FIBER_WORKER_KEYS");
  }
  void TearDown() override {
    fs::remove(file_);
    ::unsetenv("FIBER_WORKER_KEYS_FILE");
    ::unsetenv("FIBER_WORKER_KEYS");
  }
  fs::path file_;
};

}  // namespace

TEST_F(worker_credentials, are_read_from_the_named_file_and_leave_the_environment) {
  auto keys = job_keys::generate();
  std::ofstream(file_) << keys.for_worker(false);
  ::setenv("FIBER_WORKER_KEYS_FILE", file_.c_str(), 1);
  auto got = take_worker_credentials();
  EXPECT_EQ(got.client_secret, keys.client_secret);
  EXPECT_EQ(got.server_public, keys.server_public);
  EXPECT_EQ(std::getenv("FIBER_WORKER_KEYS_FILE"), nullptr);
  EXPECT_TRUE(fs::exists(file_));  // its siblings read it too
}

TEST_F(worker_credentials, a_file_that_cannot_be_read_is_an_error_naming_it) {
  ::setenv("FIBER_WORKER_KEYS_FILE", file_.c_str(), 1);
  fiber_test::expect_error([] { (void)take_worker_credentials(); }, fiber::errc::protocol_error,
                           {file_.string(), "only fiber starts workers"});
}

TEST_F(worker_credentials, a_file_of_something_else_is_refused) {
  std::ofstream(file_) << "curve,short";
  ::setenv("FIBER_WORKER_KEYS_FILE", file_.c_str(), 1);
  fiber_test::expect_error([] { (void)take_worker_credentials(); }, fiber::errc::protocol_error,
                           "malformed worker credentials");
}

TEST_F(worker_credentials, credentials_in_the_environment_itself_are_not_taken) {
  ::setenv("FIBER_WORKER_KEYS", job_keys::generate().for_worker(false).c_str(), 1);
  fiber_test::expect_error([] { (void)take_worker_credentials(); }, fiber::errc::protocol_error,
                           "FIBER_WORKER_KEYS_FILE is not set");
}

TEST_F(worker_credentials, none_given_is_an_error_saying_only_fiber_starts_workers) {
  fiber_test::expect_error([] { (void)take_worker_credentials(); }, fiber::errc::protocol_error,
                           "FIBER_WORKER_KEYS_FILE is not set");
}
