// Following a container through the engine's restarts of it, on the real dockerd (label docker;
// without an engine these tests skip): each life's output is printed once, in order, and the code
// is the last life's, after the engine has no restart left to make.
#include "cli/container_follow.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "backend/docker/blocking_engine.hpp"
#include "docker_support.hpp"
#include "engine_presence.hpp"
#include "support.hpp"

namespace {
using fiber::cli::container_follow;
using fiber::detail::container_spec;

class container_follow_test : public ::testing::Test {
 protected:
  fiber::detail::blocking_engine engine{std::string{}};
  std::string job = "fiber-test-" + fiber_test::run_id();
  std::filesystem::path state = fiber_test::run_folder() / ("follow-" + fiber_test::run_id());

  void SetUp() override {
    if (auto why = fiber_test::docker_absent(); !why.empty()) FIBER_TEST_ENGINE_MISSING("Docker", why);
    asio::io_context io;
    fiber::detail::docker_engine direct(io);
    auto why = fiber_test::prepare_test_image(io, direct);
    ASSERT_TRUE(why.empty()) << why;
    std::filesystem::create_directories(state);
  }
  void TearDown() override {
    if (IsSkipped()) return;  // no engine: nothing was started
    auto ids = engine.run<std::vector<std::string>>(
        [&](auto& e, auto done) { e.containers().list("fiber.job", job, std::move(done)); });
    engine.remove_all(ids);
    std::filesystem::remove_all(state);
  }
  /// A started container running `script`, the engine restarting it `restarts` times at most.
  std::string started(const std::string& script, int restarts) {
    container_spec s;
    s.image = fiber_test::test_image;
    s.cmd = {"/bin/sh", "-c", script};
    s.binds = {"/usr:/usr:ro", state.string() + ":/state"};
    s.labels = {{"fiber.job", job}};
    s.network_mode = "none";
    s.restarts = restarts;
    s.init = true;  // the shell is not pid 1, which ignores the SIGKILL it sends itself
    auto id = engine.run<std::string>([&](auto& e, auto done) { e.containers().create(s, std::move(done)); });
    engine.run<bool>([&](auto& e, auto done) { e.containers().start(id, std::move(done)); });
    return id;
  }
  struct followed {
    std::optional<int> code;
    std::string out, err;
  };
  followed follow(const std::string& id) {
    followed f;
    bool never = false;
    f.code = container_follow(engine, id, [&](int stream, std::string_view bytes) { (stream == 2 ? f.err : f.out) += bytes; })
                 .run(never);
    return f;
  }
};

// A life counted in a file on the host: the first is killed (as an OOM kill or a crash ends a
// master), the engine starts the container again, and the second ends well.
constexpr const char* killed_then_ends =
    "n=$(cat /state/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /state/n; echo life $n; echo said $n >&2; "
    "if [ $n -ge 2 ]; then exit 0; fi; kill -9 $$";

TEST_F(container_follow_test, a_container_started_again_by_its_engine_is_followed_to_its_last_life) {
  auto f = follow(started(killed_then_ends, 2));
  ASSERT_TRUE(f.code.has_value());
  EXPECT_EQ(*f.code, 0) << "the first life's SIGKILL is not the run's end";
  EXPECT_EQ(f.out, "life 1\nlife 2\n");
  EXPECT_EQ(f.err, "said 1\nsaid 2\n");
}

TEST_F(container_follow_test, the_code_is_the_last_lifes_once_no_restart_is_left) {
  auto f = follow(started("echo again; exit 3", 2));
  ASSERT_TRUE(f.code.has_value());
  EXPECT_EQ(*f.code, 3);
  EXPECT_EQ(f.out, "again\nagain\nagain\n") << "a life printed twice, or missed";
}

TEST_F(container_follow_test, without_a_restart_policy_the_first_end_is_the_last) {
  auto f = follow(started(killed_then_ends, 0));
  ASSERT_TRUE(f.code.has_value());
  EXPECT_EQ(*f.code, 128 + SIGKILL);
  EXPECT_EQ(f.out, "life 1\n");
}

// A worker's container is removed by its master once it ended: following it ends there, without
// an error (here it is gone before the follow starts).
TEST_F(container_follow_test, a_container_removed_once_it_ended_ends_the_follow_without_an_error) {
  auto id = started("exit 4", 0);
  (void)engine.run<int>([&](auto& e, auto done) { e.containers().wait(id, std::move(done)); });
  engine.run<bool>([&](auto& e, auto done) { e.containers().remove(id, true, std::move(done)); });
  std::optional<int> code;
  EXPECT_NO_THROW(code = follow(id).code);
  EXPECT_TRUE(code.has_value());
}

}  // namespace
