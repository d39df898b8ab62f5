// What only the Docker backend has, against a real dockerd (label docker): containers killed by
// the engine, meta as container limits, labels, volumes, the bridge network, cleanup, and its
// errors. The process, queue and pool suites also run whole under docker (docker:* in ctest).
// Without a reachable engine these tests skip.
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <boost/json.hpp>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "backend/backend.hpp"
#include "core/volume.hpp"
#include "docker_support.hpp"
#include "engine_presence.hpp"
#include "support.hpp"

namespace {
std::string me() { return fiber::current_process().name; }

// Task 0 tells who runs it, then waits for a release; the others square at once.
int hold_first(int x, fiber::simple_queue<std::string> arrived, fiber::simple_queue<int> release) {
  if (x == 0) {
    arrived.put(me()).get();
    (void)release.get().get();
  }
  return x * x;
}
void limited(fiber::simple_queue<std::string> arrived, fiber::simple_queue<int> release) {
  arrived.put(me()).get();
  (void)release.get().get();
}
void wants_a_gpu() {}
void wants_many_cpus() {}
void write_file(std::string path, std::string text) { std::ofstream(path) << text; }
void read_file(std::string path, fiber::simple_queue<std::string> out) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  out.put(text).get();
}
void wait_for(fiber::simple_queue<int> gate) { (void)gate.get().get(); }
}  // namespace
FIBER_REMOTE(hold_first);
FIBER_REMOTE(limited);
FIBER_META(limited, .cpu = 2, .memory_mb = 300);
FIBER_REMOTE(wants_a_gpu);
FIBER_META(wants_a_gpu, .gpu = 1);
FIBER_REMOTE(wants_many_cpus);
FIBER_META(wants_many_cpus, .cpu = 4096);
FIBER_REMOTE(write_file);
FIBER_REMOTE(read_file);
FIBER_REMOTE(wait_for);

namespace {
using fiber_test::run_engine;

class docker_backend : public ::testing::Test {
 protected:
  asio::io_context io;
  fiber::detail::docker_engine engine{io};

  void SetUp() override {
    if (auto why = fiber_test::docker_absent(); !why.empty()) FIBER_TEST_ENGINE_MISSING("Docker", why);
    ASSERT_EQ(fiber_test::prepare_test_image(io, engine), "") << "the engine answers, and fiber's docker_engine failed";
  }
  void TearDown() override {
    // Every context of the test has ended: none of its containers may remain.
    EXPECT_TRUE(fiber_test::my_containers().empty());
  }

  static fiber::config config(std::vector<std::pair<std::string, std::string>> more = {}) {
    std::string build = FIBER_TEST_BUILD_DIR;
    std::vector<std::pair<std::string, std::string>> settings = {
        {"backend", "docker"},
        {"image", fiber_test::test_image},
        {"volumes", "/usr:/usr:ro,/tmp:/tmp," + build + ":" + build + ":ro"}};
    for (auto& kv : more) {
      std::erase_if(settings, [&](auto& s) { return s.first == kv.first; });
      settings.push_back(kv);
    }
    return fiber::config::load(settings);
  }

  /// The one container of `ctx` that runs process `name`: its description.
  boost::json::object container_of(fiber::context& ctx, const std::string& name) {
    auto listed = run_engine<std::vector<fiber::detail::container_summary>>(
        io, [&](auto done) { engine.containers().list_labeled("fiber.process", std::move(done)); });
    std::string id;
    for (auto& c : listed.value)
      if (c.labels["fiber.process"] == name && c.labels["fiber.job"] == ctx.job_id()) id = c.id;
    if (id.empty()) return {};
    auto text = run_engine<std::string>(io, [&](auto done) { engine.containers().inspect(id, std::move(done)); });
    return boost::json::parse(text.value).as_object();
  }
};
}  // namespace

TEST_F(docker_backend, a_worker_container_killed_by_the_engine_mid_map_has_its_tasks_rerun) {
  std::vector<std::string> ran_task_0;
  {
    fiber::context ctx(config());
    fiber::pool p(ctx, 2);
    fiber::simple_queue<std::string> arrived(ctx);
    fiber::simple_queue<int> release(ctx);
    std::vector<std::tuple<int, fiber::simple_queue<std::string>, fiber::simple_queue<int>>> args;
    for (int i = 0; i < 40; ++i) args.emplace_back(i, arrived, release);
    auto all = p.starmap_async(&hold_first, args, 1);
    ran_task_0.push_back(arrived.get().get());
    auto victim = container_of(ctx, ran_task_0[0]);
    ASSERT_FALSE(victim.empty());
    auto id = std::string(victim.at("Id").as_string());
    auto killed = run_engine<bool>(io, [&](auto done) { engine.containers().kill(id, SIGKILL, std::move(done)); });
    ASSERT_FALSE(killed.ec) << killed.why;
    ran_task_0.push_back(arrived.get().get());  // task 0 again, on another worker
    release.put(1).get();
    auto r = std::move(all).get();
    std::vector<int> expected;
    for (int i = 0; i < 40; ++i) expected.push_back(i * i);
    EXPECT_EQ(r, expected);
    EXPECT_EQ(p.stats().workers_lost, 1u);
  }
  EXPECT_NE(ran_task_0[0], ran_task_0[1]);
}

TEST_F(docker_backend, meta_becomes_the_containers_limits_and_labels_say_whose_it_is) {
  fiber::context ctx(config());
  fiber::simple_queue<std::string> arrived(ctx);
  fiber::simple_queue<int> release(ctx);
  fiber::process p(ctx, &limited, arrived, release);
  p.start().get();
  EXPECT_EQ(arrived.get().get(), p.name());
  auto c = container_of(ctx, p.name());
  ASSERT_FALSE(c.empty());
  auto& host = c.at("HostConfig").as_object();
  EXPECT_EQ(host.at("NanoCpus").to_number<std::int64_t>(), 2'000'000'000);
  EXPECT_EQ(host.at("Memory").to_number<std::int64_t>(), 300LL * 1024 * 1024);
  auto& labels = c.at("Config").at("Labels").as_object();
  EXPECT_EQ(labels.at("fiber.master").as_string(), fiber_test::master_label());
  EXPECT_EQ(labels.at("fiber.job").as_string(), ctx.job_id());
  EXPECT_EQ(c.at("State").at("Pid").to_number<int>(), p.pid());
  release.put(1).get();
  p.join().get();
  EXPECT_EQ(p.exitcode(), 0);
  // Ended means removed.
  EXPECT_TRUE(container_of(ctx, p.name()).empty());
}

TEST_F(docker_backend, a_gpu_function_asks_the_engine_for_a_gpu) {
  fiber::context ctx(config());
  fiber::process p(ctx, &wants_a_gpu);
  try {
    p.start().get();
    p.join().get();  // an engine with GPUs ran it
    EXPECT_EQ(p.exitcode(), 0);
  } catch (const fiber::error& e) {
    // This engine has none; its refusal shows that a GPU was asked for, and that none will come.
    EXPECT_EQ(e.code(), fiber::errc::unsatisfiable) << e.what();
    EXPECT_NE(std::string(e.what()).find("nvidia"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("NVIDIA Container Toolkit"), std::string::npos) << e.what();
  }
}

// A request the engine's host can never meet fails at start (before any container), naming both.
TEST_F(docker_backend, more_cpus_than_the_engine_has_fail_start_naming_both) {
  fiber::context ctx(config());
  fiber_test::expect_error([&] { fiber::process(ctx, &wants_many_cpus).start().get(); }, fiber::errc::unsatisfiable,
                           {"asks for cpu 4096", "the engine's host has cpu "});
}

TEST_F(docker_backend, a_named_volume_and_the_bridge_network) {
  auto volume = "fiber-test-data-" + fiber_test::run_id();
  {
    auto cfg = config({{"docker_network", "bridge"}});
    cfg.volumes += "," + volume + ":/data";
    fiber::context ctx(cfg);
    fiber::process writer(ctx, &write_file, std::string("/data/hello"), std::string("written in a container"));
    writer.start().get();
    writer.join().get();
    ASSERT_EQ(writer.exitcode(), 0);
    fiber::simple_queue<std::string> out(ctx);
    fiber::process reader(ctx, &read_file, std::string("/data/hello"), out);
    reader.start().get();
    EXPECT_EQ(out.get().get(), "written in a container");
    reader.join().get();
  }
  EXPECT_FALSE(run_engine<bool>(io, [&](auto done) { engine.volumes().remove(volume, std::move(done)); }).ec);
}

TEST_F(docker_backend, terminate_and_a_stopped_context_leave_no_container) {
  fiber::context ctx(config());
  fiber::simple_queue<int> gate(ctx);
  fiber::process a(ctx, &wait_for, gate), b(ctx, &wait_for, gate);
  a.start().get();
  b.start().get();
  a.terminate().get();
  EXPECT_EQ(a.exitcode(), -SIGTERM);
  EXPECT_TRUE(container_of(ctx, a.name()).empty());
  EXPECT_FALSE(container_of(ctx, b.name()).empty());
  ctx.stop();
  EXPECT_FALSE(b.is_alive());
  EXPECT_TRUE(fiber_test::my_containers().empty());
}

TEST_F(docker_backend, a_child_that_fails_before_its_handshake_shows_its_last_output) {
  auto script = fiber_test::run_folder() / ("fiber-not-a-worker-" + std::to_string(getpid()));
  std::ofstream(script) << "#!/bin/sh\necho 'this is not a fiber worker' >&2\nexit 3\n";
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  fiber::context ctx(config({{"executable", script.string()}}));
  fiber_test::expect_error([&] { fiber::process(ctx, &wait_for, fiber::simple_queue<int>(ctx)).start().get(); },
                           fiber::errc::spawn_failed, {"exited with code 3", "this is not a fiber worker"});
  std::filesystem::remove(script);
}

TEST_F(docker_backend, a_missing_image_is_named_with_the_fix) {
  fiber::context ctx(config({{"image", "fiber-no-such-image:1"}}));
  fiber_test::expect_error([&] { fiber::process(ctx, &wants_a_gpu).start().get(); }, fiber::errc::config_error,
                           {"image 'fiber-no-such-image:1'", "FIBER_IMAGE"});
}

TEST_F(docker_backend, no_image_configured_is_a_config_error) {
  fiber::context ctx(config({{"image", ""}}));
  fiber_test::expect_error([&] { fiber::process(ctx, &wants_a_gpu).start().get(); }, fiber::errc::config_error,
                           {"backend=docker needs an image", "FIBER_IMAGE"});
}

TEST_F(docker_backend, an_unreachable_engine_names_the_socket_and_the_fix) {
  std::string saved = std::getenv("DOCKER_HOST") ? std::getenv("DOCKER_HOST") : "";
  ::setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock", 1);
  {
    fiber::context ctx(config());
    fiber_test::expect_error([&] { fiber::process(ctx, &wants_a_gpu).start().get(); }, fiber::errc::backend_unavailable,
                             {"unix:///nonexistent/docker.sock", "DOCKER_HOST"});
  }
  if (saved.empty())
    ::unsetenv("DOCKER_HOST");
  else
    ::setenv("DOCKER_HOST", saved.c_str(), 1);
}

TEST(docker_config, volumes_are_checked_when_set) {
  fiber_test::expect_error([] { (void)fiber::config::load({{"volumes", "/data"}}); }, fiber::errc::config_error,
                           {"volumes", "/data"});
  fiber_test::expect_error([] { (void)fiber::config::load({{"volumes", "v:relative"}}); }, fiber::errc::config_error,
                           {"absolute path"});
  fiber_test::expect_error([] { (void)fiber::config::load({{"volumes", "v:/x:rx"}}); }, fiber::errc::config_error,
                           {"ro or rw"});
  // A volume or claim name alone mounts at /persistent.
  auto d = fiber::detail::parse_volumes("claim,other:ro");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].target, "/persistent");
  EXPECT_FALSE(d[0].read_only);
  EXPECT_EQ(d[1].source, "other");
  EXPECT_EQ(d[1].target, "/persistent");
  EXPECT_TRUE(d[1].read_only);
  auto v = fiber::detail::parse_volumes("/host:/in:ro,named:/data");
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].source, "/host");
  EXPECT_EQ(v[0].target, "/in");
  EXPECT_TRUE(v[0].read_only);
  EXPECT_EQ(v[1].source, "named");
  EXPECT_FALSE(v[1].read_only);
}

TEST_F(docker_backend, a_pool_dropped_while_its_containers_are_being_created_leaves_none) {
  fiber::context ctx(config());
  for (int i = 0; i < 3; ++i) {
    fiber::pool p(ctx, 4);  // workers start at once; the pool goes before they are ready
  }
  {
    fiber::pool later(ctx, 1);  // created after the others: the engine has answered them by now
    later.ready().get();
  }
  EXPECT_TRUE(fiber_test::my_containers().empty());  // with the context still running
}

// A durable run's master takes up the containers its journal names; one that is not a durable
// run's worker (a journal changed by hand, or naming another user's container by its id) is
// refused, and neither followed nor removed at the master's end.
TEST_F(docker_backend, a_container_that_is_not_a_durable_worker_is_not_taken_up) {
  fiber::detail::container_spec plain;
  plain.image = fiber_test::test_image;
  plain.cmd = {"/usr/bin/sleep", "600"};
  plain.binds = {"/usr:/usr:ro"};
  auto made = run_engine<std::string>(io, [&](auto done) { engine.containers().create(plain, std::move(done)); });
  ASSERT_FALSE(made.ec) << made.why;
  struct removed_at_end {
    std::function<void()> f;
    ~removed_at_end() { f(); }
  } gone{[&] { run_engine<bool>(io, [&](auto done) { engine.containers().remove(made.value, true, std::move(done)); }); }};
  ASSERT_FALSE(run_engine<bool>(io, [&](auto done) { engine.containers().start(made.value, std::move(done)); }).ec);
  {
    asio::io_context master_io;
    auto backend = fiber::detail::make_backend(master_io, config(), "not-mine");
    fiber_test::expect_error([&] { (void)backend->adopt(made.value); }, fiber::errc::spawn_failed,
                             "is not a durable run's worker");
  }
  auto state = run_engine<std::string>(io, [&](auto done) { engine.containers().inspect(made.value, std::move(done)); });
  ASSERT_FALSE(state.ec) << "the container was removed: " << state.why;
  EXPECT_TRUE(boost::json::parse(state.value).at("State").at("Running").as_bool());
}
