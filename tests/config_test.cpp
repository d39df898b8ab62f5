#include <fiber/config.hpp>
#include <fiber/error.hpp>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "support.hpp"

namespace {
// Each test runs with its own config file and no FIBER_* settings from the outside.
class config_test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fiber_test::run_folder() / ("fiber-config-" + std::to_string(getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    file_ = (dir_ / ".fiberconfig").string();
    setenv("FIBER_CONFIG_FILE", file_.c_str(), 1);
    write("");
    for (auto k : fiber::config::keys()) {
      std::string name = "FIBER_" + std::string(k);
      for (auto& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      unsetenv(name.c_str());
    }
  }
  void TearDown() override {
    unsetenv("FIBER_CONFIG_FILE");
    unsetenv("FIBER_LOG_LEVEL");
    unsetenv("FIBER_NO_SUCH_KEY");
    unsetenv("FIBER_CPU_PER_JOB");
    std::filesystem::remove_all(dir_);
  }
  void write(const std::string& text) { std::ofstream(file_) << text; }
  std::filesystem::path dir_;
  std::string file_;
};

void expect_config_error(auto&& f, const std::string& mentions) {
  fiber_test::expect_error(f, fiber::errc::config_error, mentions);
}
}  // namespace

TEST_F(config_test, defaults) {
  auto c = fiber::config::load();
  EXPECT_EQ(c.backend, "local");
  EXPECT_EQ(c.log_level, fiber::log_level::warn);
  EXPECT_EQ(c.cpu_per_job, 1);
  EXPECT_EQ(c.kubernetes_namespace, "");
}

TEST_F(config_test, file_values) {
  write("# comment\nlog_level = debug\ncpu_per_job=4\n\nimage = fiber:latest\n");
  auto c = fiber::config::load();
  EXPECT_EQ(c.log_level, fiber::log_level::debug);
  EXPECT_EQ(c.cpu_per_job, 4);
  EXPECT_EQ(c.image, "fiber:latest");
}

TEST_F(config_test, environment_overrides_file_and_code_overrides_both) {
  write("cpu_per_job = 4\nlog_level = debug\n");
  setenv("FIBER_CPU_PER_JOB", "8", 1);
  auto c = fiber::config::load();
  EXPECT_EQ(c.cpu_per_job, 8);
  EXPECT_EQ(c.log_level, fiber::log_level::debug);
  auto d = fiber::config::load({{"cpu_per_job", "16"}});
  EXPECT_EQ(d.cpu_per_job, 16);
}

TEST_F(config_test, unknown_key_in_file_names_key_and_line) {
  write("log_level = info\nlog_levle = debug\n");
  expect_config_error([] { (void)fiber::config::load(); }, "log_levle");
  expect_config_error([] { (void)fiber::config::load(); }, ":2");
}

TEST_F(config_test, unknown_key_in_environment) {
  setenv("FIBER_NO_SUCH_KEY", "1", 1);
  expect_config_error([] { (void)fiber::config::load(); }, "FIBER_NO_SUCH_KEY");
}

TEST_F(config_test, a_pods_downward_api_variables_are_not_keys) {
  // What a master in a Kubernetes pod is given about its pod (docs/backends.md).
  setenv("FIBER_POD_NAME", "master-0", 1);
  setenv("FIBER_POD_IP", "10.1.2.3", 1);
  EXPECT_NO_THROW((void)fiber::config::load());
  unsetenv("FIBER_POD_NAME");
  unsetenv("FIBER_POD_IP");
}

TEST_F(config_test, the_fiber_commands_variables_are_not_keys) {
  // What `fiber run` gives a master in a container, and the command's own default registry.
  setenv("FIBER_RUN_NAME", "pi-3fa2c1", 1);
  setenv("FIBER_REGISTRY", "registry.example:5000/team", 1);
  EXPECT_NO_THROW((void)fiber::config::load());
  unsetenv("FIBER_RUN_NAME");
  unsetenv("FIBER_REGISTRY");
}

TEST_F(config_test, unknown_key_in_code) {
  expect_config_error([] { (void)fiber::config::load({{"backnd", "local"}}); }, "backnd");
}

TEST_F(config_test, an_unknown_key_near_a_known_one_suggests_it) {
  expect_config_error([] { (void)fiber::config::load({{"backnd", "local"}}); }, "did you mean 'backend'?");
  expect_config_error([] { (void)fiber::config::load({{"log_levle", "info"}}); }, "did you mean 'log_level'?");
  // Nothing near: no guess.
  try {
    (void)fiber::config::load({{"colour_scheme", "dark"}});
    ADD_FAILURE() << "an unknown key was taken";
  } catch (const fiber::error& e) {
    EXPECT_EQ(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
  }
}

TEST_F(config_test, a_bad_value_says_where_it_was_set) {
  expect_config_error([] { (void)fiber::config::load({{"backend", "dockr"}}); }, "(set in code)");
  setenv("FIBER_BACKEND", "dockr", 1);
  expect_config_error([] { (void)fiber::config::load(); }, "'dockr', expected one of local, docker, kubernetes, slurm "
                                                           "(set in environment variable FIBER_BACKEND)");
  unsetenv("FIBER_BACKEND");
  write("log_level = info\nbackend = dockr\n");
  expect_config_error([] { (void)fiber::config::load(); }, "(set in config file " + file_ + ":2)");
  fiber::config c;
  expect_config_error([&] { c.set("cpu_per_job", "many"); }, "(set in code)");
}

TEST_F(config_test, bad_values_name_the_key) {
  expect_config_error([] { (void)fiber::config::load({{"cpu_per_job", "many"}}); }, "cpu_per_job");
  expect_config_error([] { (void)fiber::config::load({{"cpu_per_job", "0"}}); }, "cpu_per_job");
  expect_config_error([] { (void)fiber::config::load({{"backend", "mesos"}}); }, "backend");
  expect_config_error([] { (void)fiber::config::load({{"log_level", "loud"}}); }, "log_level");
  expect_config_error([] { (void)fiber::config::load({{"encryption", "sometimes"}}); }, "encryption");
  expect_config_error([] { (void)fiber::config::load({{"remote_transport", "tcp"}}); }, "remote_transport");
  expect_config_error([] { (void)fiber::config::load({{"hub_workers", "spawn"}}); }, "hub_workers");
  expect_config_error([] { (void)fiber::config::load({{"wait_spin_us", "-1"}}); }, "wait_spin_us");
  expect_config_error([] { (void)fiber::config::load({{"wait_spin_us", "2000000"}}); }, "wait_spin_us");
  setenv("FIBER_LOG_LEVEL", "verbose", 1);
  expect_config_error([] { (void)fiber::config::load(); }, "log_level");
}

TEST_F(config_test, a_kubernetes_cpu_request_is_a_cpu_quantity_above_zero) {
  for (auto ok : {"100m", "0.5", "2", "1500m", ""})
    EXPECT_EQ(fiber::config::load({{"kubernetes_cpu_request", ok}}).kubernetes_cpu_request, ok);
  for (auto bad : {"0", "0m", "1.5m", "half", "100Mi", ".", "-1", "1e3"})
    expect_config_error([&] { (void)fiber::config::load({{"kubernetes_cpu_request", bad}}); }, "100m (millicores), 0.5 or 2");
}

TEST_F(config_test, a_run_id_is_a_file_name_that_cannot_leave_the_journals_folder) {
  for (auto ok : {"es-20261129-061500-3fa2c1d0", "run_1.b", ""})
    EXPECT_EQ(fiber::config::load({{"run_id", ok}}).run_id, ok);
  for (std::string bad : {std::string("../x"), std::string("a/b"), std::string(".hidden"), std::string("-flag"),
                          std::string("a b"), std::string(65, 'a')})
    expect_config_error([&] { (void)fiber::config::load({{"run_id", bad}}); }, "up to 64 letters, digits");
  expect_config_error([] { (void)fiber::config::load({{"journal_max_bytes", "100"}}); }, "journal_max_bytes");
  expect_config_error([] { (void)fiber::config::load({{"journal_sync_ms", "0"}}); }, "journal_sync_ms");
}

TEST_F(config_test, items_round_trip) {
  auto c = fiber::config::load({{"log_level", "error"}, {"mem_per_job", "512"}, {"executable", "/bin/x"}});
  fiber::config d;
  for (auto& [k, v] : c.items()) d.set(k, v);
  EXPECT_EQ(c, d);
  EXPECT_EQ(c.items().size(), fiber::config::keys().size());
}

TEST_F(config_test, missing_named_file_is_an_error) {
  setenv("FIBER_CONFIG_FILE", "/nonexistent/fiber.conf", 1);
  expect_config_error([] { (void)fiber::config::load(); }, "/nonexistent/fiber.conf");
}
