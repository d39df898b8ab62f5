// The claim copy service (src/runtime/claim_copy_service): any fiber program started with
// FIBER_CLAIM_COPY_PORT serves the folder of FIBER_CLAIM_COPY_ROOT instead of running its main.
// Here a real child (tests/exit_with) serves a temporary folder on this host, and the tests talk
// to it over HTTP as the Kubernetes API server's pod proxy would; tests/cli_kubernetes_test runs
// the same through a pod.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asio/connect.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>
#include <filesystem>
#include <fstream>
#include <optional>

#include "backend/command.hpp"
#include "core/file_tree.hpp"
#include "runtime/claim_copy_service.hpp"
#include "http_support.hpp"
#include "transport/http_client.hpp"
#include "run_folder.hpp"

namespace fs = std::filesystem;

namespace {

class claim_copy_service : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fiber_test::run_folder() / ("claim_copy_service_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "runs");
    std::ofstream(root_ / "runs" / "a.txt") << "alpha\n";
    token_file_ = fiber_test::run_folder() / ("claim_copy_token_" + std::to_string(::getpid()));
    std::ofstream(token_file_) << token_ << "\n";  // as the mounted Secret holds it
    env_ = fiber::detail::environment_with({{fiber::detail::env_claim_copy_port, "0"},
                                            {fiber::detail::env_claim_copy_token_file, token_file_.string()},
                                            {fiber::detail::env_claim_copy_root, root_.string()},
                                            {"FIBER_MAX_MESSAGE_BYTES", "100000"}});
    child_ = fiber::detail::spawn_command({FIBER_TEST_EXIT_WITH, "9", "main must not run"},
                                          {.pipe_stdout = true, .env = &env_});
    // Its first line says it serves, and on which port.
    std::string seen;
    char buf[512];
    while (seen.find('\n') == std::string::npos) {
      auto n = ::read(child_.stdout_fd, buf, sizeof buf);
      ASSERT_GT(n, 0) << "the service ended before it served: " << seen;
      seen.append(buf, static_cast<std::size_t>(n));
    }
    first_line_ = seen.substr(0, seen.find('\n'));
    ASSERT_EQ(first_line_.rfind(fiber::detail::claim_copy_ready_line, 0), 0u) << first_line_;
    port_ = std::stoi(first_line_.substr(first_line_.rfind(' ') + 1));
  }
  void TearDown() override {
    if (child_.pid > 0) {
      ::kill(child_.pid, SIGTERM);
      ::waitpid(child_.pid, nullptr, 0);
      ::close(child_.stdout_fd);
    }
    fs::remove_all(root_);
    fs::remove(token_file_);
  }

  fiber::detail::http_response call(const std::string& method, const std::string& target, const std::string& body = {},
                                    std::optional<std::string> token = std::nullopt) {
    fiber::detail::http_request req;
    req.method = method;
    req.url = "http://127.0.0.1:" + std::to_string(port_) + target;
    req.headers.emplace_back(fiber::detail::claim_copy_token_header, token.value_or(token_));
    req.body = body;
    return fiber_test::http_call(std::move(req));
  }

  fs::path root_;
  std::string token_ = "a-token-for-this-test-of-32-chars-or-more";
  fs::path token_file_;
  std::vector<std::string> env_;
  fiber::detail::spawned_command child_;
  std::string first_line_;
  int port_ = 0;
};

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

TEST_F(claim_copy_service, a_fiber_program_serves_the_claim_instead_of_running_its_main) {
  EXPECT_NE(first_line_.find(root_.string()), std::string::npos) << first_line_;
  // Down: the folder, packed.
  auto got = call("GET", "/tree?path=runs");
  ASSERT_EQ(got.status, 200) << got.body;
  auto back = fiber_test::run_folder() / ("claim_copy_service_back_" + std::to_string(::getpid()));
  fs::remove_all(back);
  fs::create_directories(back);
  EXPECT_EQ(fiber::detail::unpack_tree(got.body, back, "runs"), 2u);
  EXPECT_EQ(read(back / "runs" / "a.txt"), "alpha\n");
  // Up: into folders it makes, under the name asked for (a path with a space, percent-encoded).
  std::ofstream(back / "up.txt") << "uploaded";
  auto put = call("PUT", "/tree?path=new%20dir/deeper/up.txt", fiber::detail::pack_tree(back / "up.txt", 100000));
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(read(root_ / "new dir" / "deeper" / "up.txt"), "uploaded");
  fs::remove_all(back);
}

TEST_F(claim_copy_service, a_request_without_the_token_is_refused_and_changes_nothing) {
  std::ofstream(root_ / "up.txt") << "x";
  auto packed = fiber::detail::pack_tree(root_ / "up.txt", 100000);
  EXPECT_EQ(call("GET", "/tree?path=runs", {}, "wrong").status, 403);
  EXPECT_EQ(call("PUT", "/tree?path=stolen", packed, "").status, 403);
  EXPECT_FALSE(fs::exists(root_ / "stolen"));
}

TEST_F(claim_copy_service, bad_requests_get_an_answer_that_says_what_is_wrong) {
  auto missing = call("GET", "/tree?path=no/such");
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(missing.body.find("no such file or folder in the claim: no/such"), std::string::npos) << missing.body;
  auto leaving = call("GET", "/tree?path=../etc");
  EXPECT_EQ(leaving.status, 400);
  EXPECT_NE(leaving.body.find("leaves the claim"), std::string::npos) << leaving.body;
  auto garbage = call("PUT", "/tree?path=x", "not a packed tree");
  EXPECT_EQ(garbage.status, 400);
  EXPECT_NE(garbage.body.find("not a packed file tree"), std::string::npos) << garbage.body;
  EXPECT_FALSE(fs::exists(root_ / "x"));
  // Over max_message_bytes: refused before it is read.
  auto big = call("PUT", "/tree?path=big", std::string(200000, 'b'));
  EXPECT_EQ(big.status, 413);
  std::ofstream(root_ / "big.bin") << std::string(150000, 'b');
  EXPECT_EQ(call("GET", "/tree?path=big.bin").status, 413);
  EXPECT_EQ(call("POST", "/tree?path=x").status, 405);
  EXPECT_EQ(call("GET", "/other").status, 404);
}

// A program of the run may leave a link in the claim to a folder of the helper's own (its
// service account's token, another claim): nothing is read or written through it.
TEST_F(claim_copy_service, nothing_is_read_or_written_through_a_link_in_the_claims_folders) {
  auto outside = fiber_test::run_folder() / ("claim_copy_service_outside_" + std::to_string(::getpid()));
  fs::create_directories(outside);
  std::ofstream(outside / "token") << "secret";
  fs::create_directory_symlink(outside, root_ / "link");
  auto got = call("GET", "/tree?path=link/token");
  EXPECT_EQ(got.status, 409) << got.body;
  EXPECT_NE(got.body.find("link"), std::string::npos) << got.body;
  EXPECT_EQ(got.body.find("secret"), std::string::npos);
  std::ofstream(root_ / "up.txt") << "x";
  EXPECT_EQ(call("PUT", "/tree?path=link/planted", fiber::detail::pack_tree(root_ / "up.txt", 100000)).status, 409);
  EXPECT_FALSE(fs::exists(outside / "planted"));
  fs::remove_all(outside);
}

// What a proxy may send: a body in chunks, after asking to continue.
TEST_F(claim_copy_service, a_chunked_body_after_expect_100_continue_is_taken_whole) {
  std::ofstream(root_ / "src.txt") << std::string(5000, 'c');
  auto packed = fiber::detail::pack_tree(root_ / "src.txt", 100000);
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  s.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)});
  auto hex = [](std::size_t n) {
    char b[32];
    std::snprintf(b, sizeof b, "%zx", n);
    return std::string(b);
  };
  auto half = packed.size() / 2;
  std::string request = "PUT /tree?path=chunked.txt HTTP/1.1\r\nHost: x\r\n" + std::string(fiber::detail::claim_copy_token_header) +
                        ": " + token_ + "\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n" + hex(half) +
                        "\r\n" + packed.substr(0, half) + "\r\n" + hex(packed.size() - half) + "\r\n" + packed.substr(half) +
                        "\r\n0\r\n\r\n";
  asio::write(s, asio::buffer(request));
  s.shutdown(asio::ip::tcp::socket::shutdown_send);
  std::string answer;
  std::error_code ec;
  char buf[4096];
  for (std::size_t n; (n = s.read_some(asio::buffer(buf), ec)) > 0 || !ec;) answer.append(buf, n);
  EXPECT_EQ(answer.rfind("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n", 0), 0u) << answer;
  EXPECT_EQ(read(root_ / "chunked.txt"), std::string(5000, 'c'));
}
