// libcurl is loaded when the first HTTP client is made (transport/curl_library), not linked: a
// worker, which never makes an HTTP call, never maps it or the libraries it brings; the first use
// in a process loads it, and its functions answer.
#include "transport/curl_library.hpp"

#include <gtest/gtest.h>

#include <fiber/fiber.hpp>
#include <fstream>
#include <string>

#include "support.hpp"

namespace {
// What the kernel says this process maps, not what fiber says it loaded.
bool maps_libcurl() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.find("/libcurl") != std::string::npos) return true;
  return false;
}
bool worker_maps_libcurl() { return maps_libcurl(); }
}  // namespace
FIBER_REMOTE(worker_maps_libcurl);

TEST(curl_library, a_worker_maps_no_libcurl) {
  FIBER_TEST_LOCAL_ONLY("reads what a local worker maps");
  fiber::pool p(1);
  EXPECT_FALSE(p.apply(&worker_maps_libcurl).get());
}

TEST(curl_library, the_first_use_loads_it_and_its_functions_answer) {
  const auto& lib = fiber::detail::curl();
  EXPECT_TRUE(maps_libcurl());
  EXPECT_STREQ(lib.easy_strerror(CURLE_OK), "No error");
  CURL* easy = lib.easy_init();
  ASSERT_NE(easy, nullptr);
  EXPECT_EQ(lib.easy_setopt(easy, CURLOPT_URL, "http://localhost/"), CURLE_OK);
  lib.easy_cleanup(easy);
  EXPECT_EQ(&fiber::detail::curl(), &lib);  // loaded once
}
