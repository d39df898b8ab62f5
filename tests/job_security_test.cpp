// A job's credentials as a worker receives them.
#include "runtime/trust/job_security.hpp"

#include <gtest/gtest.h>

#include "fiber/error.hpp"

namespace {
using fiber::detail::job_keys;

TEST(job_security, curve_credentials_reach_a_worker_without_the_servers_secret) {
  auto keys = job_keys::generate();
  auto text = keys.for_worker(false);
  EXPECT_EQ(text.find(keys.server_secret), std::string::npos);
  auto worker = job_keys::from_worker_text(text);
  EXPECT_FALSE(worker.plain);
  EXPECT_EQ(worker.server_public, keys.server_public);
  EXPECT_EQ(worker.client_public, keys.client_public);
  EXPECT_EQ(worker.client_secret, keys.client_secret);
  EXPECT_TRUE(worker.server_secret.empty());
}

TEST(job_security, local_credentials_are_the_password_only) {
  auto keys = job_keys::generate();
  auto worker = job_keys::from_worker_text(keys.for_worker(true));
  EXPECT_TRUE(worker.plain);
  EXPECT_EQ(worker.password, keys.password);
  EXPECT_TRUE(worker.client_secret.empty());
}

TEST(job_security, each_job_has_keys_of_its_own) {
  auto a = job_keys::generate(), b = job_keys::generate();
  EXPECT_NE(a.server_public, b.server_public);
  EXPECT_NE(a.client_secret, b.client_secret);
  EXPECT_NE(a.password, b.password);
}

TEST(job_security, malformed_credentials_are_a_protocol_error) {
  for (auto text : {"", "plain", "plain,short", "curve,a,b,c", "rsa,xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}) {
    try {
      (void)job_keys::from_worker_text(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const fiber::error& e) {
      EXPECT_EQ(e.code(), make_error_code(fiber::errc::protocol_error)) << text;
      EXPECT_NE(std::string(e.what()).find("only fiber starts workers"), std::string::npos);
    }
  }
}

}  // namespace
