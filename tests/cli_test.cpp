// The `fiber` command on the real test dockerd and the real registry (scripts/engines.sh starts
// both): run with a build and a push, attach and the master's exit code, ps, logs, stop, gc, a
// dry run, and every bad input by its message. Label docker; without the engine or the registry
// these tests skip (under CI they fail).
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

#include <fiber/history.hpp>

#include "cli_support.hpp"
#include "docker_support.hpp"
#include "durable_support.hpp"
#include "engine_presence.hpp"
#include "support.hpp"
#include "transport/http_client.hpp"
#include "transport/run_until.hpp"

namespace fs = std::filesystem;
using fiber_test::fiber_cmd;
using fiber_test::command_outcome;

namespace {

std::string http_get(const std::string& url) {
  std::string out;
  if (FILE* p = ::popen(("curl -s --max-time 10 " + url).c_str(), "r")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

std::string unique(const std::string& what) { return "cli-" + what + "-" + fiber_test::run_id(); }

class fiber_command : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = fiber_test::docker_absent(); !why.empty()) FIBER_TEST_ENGINE_MISSING("Docker", why);
    std::ifstream in(std::string(FIBER_TEST_BUILD_DIR) + "/engines/registry/address");
    if (!(in >> registry_) || http_get("http://" + registry_ + "/v2/").empty())
      FIBER_TEST_ENGINE_MISSING("registry", "no registry answers (scripts/engines.sh start registry starts one)");
  }
  void TearDown() override {
    for (auto& name : started_) fiber_cmd("stop " + name);
  }
  /// Runs one container list to completion: ids of containers labelled key=value.
  static std::vector<std::string> containers(const std::string& key, const std::string& value) {
    asio::io_context io;
    fiber::detail::docker_engine engine(io);
    return fiber_test::run_engine<std::vector<std::string>>(io, [&](auto done) { engine.containers().list(key, value, std::move(done)); })
        .value;
  }
  /// Waits (on the engine's log stream: no polling) until run `name`'s master has written a line.
  static std::string first_output(const std::string& name) {
    asio::io_context io;
    fiber::detail::docker_engine engine(io);
    auto ids = containers("fiber.run", name);
    if (ids.empty()) return {};
    std::string seen;
    bool ended = false;
    engine.containers().follow_logs(
        ids[0], [&](int, std::string_view out) { seen.append(out); }, [&](std::error_code, bool, std::string) { ended = true; });
    while (seen.find('\n') == std::string::npos && !ended && io.run_one()) {
    }
    return seen;
  }
  std::string registry_;
  std::vector<std::string> started_;
};

}  // namespace

TEST_F(fiber_command, runs_the_pi_example_built_and_pushed_and_exits_with_its_code) {
  auto name = unique("pi");
  started_.push_back(name);
  auto r = fiber_cmd("run --build --registry " + registry_ + "/fibertest --attach --name " + name + " -- " +
                     FIBER_TEST_BUILD_DIR "/examples/pi_estimation");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Pi is roughly 3.1"), std::string::npos) << r.out;
  auto catalog = http_get("http://" + registry_ + "/v2/_catalog");
  EXPECT_NE(catalog.find("fibertest/pi-estimation"), std::string::npos) << catalog;
  // The master ran the pushed image by digest, and so did its workers (FIBER_IMAGE).
  EXPECT_NE(r.out.find("image " + registry_ + "/fibertest/pi-estimation@sha256:"), std::string::npos) << r.out;
  auto tags = http_get("http://" + registry_ + "/v2/fibertest/pi-estimation/tags/list");
  EXPECT_NE(tags.find("\"tags\""), std::string::npos) << tags;
}

// The master's container records the run into this host's record folder (bound into it), so the
// run is in `fiber history` here once its container is gone.
TEST_F(fiber_command, a_runs_recording_lands_on_this_host_and_outlives_its_container) {
  auto name = unique("recorded");
  started_.push_back(name);
  auto dir = fiber_test::run_folder() / unique("runs");
  fs::remove_all(dir);
  auto env = "FIBER_RECORD_DIR=" + dir.string();
  auto r = fiber_cmd("run --build --attach --name " + name + " -- " FIBER_TEST_BUILD_DIR "/examples/pi_estimation", env);
  ASSERT_EQ(r.code, 0) << r.out;
  fiber_cmd("stop " + name);
  EXPECT_TRUE(containers("fiber.run", name).empty());
  auto runs = fiber::run_history(fiber::config::load({{"record_dir", dir.string()}}));
  ASSERT_EQ(runs.size(), 1u) << r.out;
  auto& run = runs.front();
  EXPECT_EQ(run.backend, "docker");
  EXPECT_NE(run.program.find("pi_estimation"), std::string::npos) << run.program;
  EXPECT_TRUE(run.ended);
  EXPECT_GT(run.tasks_sent, 0u);
  EXPECT_EQ(run.tasks_done, run.tasks_sent);
  EXPECT_GT(run.workers_started, 0u);
  auto listed = fiber_cmd("history", env);
  EXPECT_NE(listed.out.find(run.id), std::string::npos) << listed.out;
  fs::remove_all(dir);
}

// The second test registry wants a login (htpasswd: fiber / fiber-test-secret, scripts/engines.sh).
TEST_F(fiber_command, a_registry_wanting_a_login_gets_it_from_the_docker_config_and_a_refusal_says_what_to_do) {
  std::ifstream in(std::string(FIBER_TEST_BUILD_DIR) + "/engines/registry/auth-address");
  std::string registry;
  if (!(in >> registry)) FIBER_TEST_ENGINE_MISSING("registry", "no registry with logins runs (scripts/engines.sh start registry)");
  auto config = [&](const std::string& name, const std::string& auth) {
    auto dir = fiber_test::run_folder() / unique(name);
    fs::create_directories(dir);
    if (!auth.empty()) std::ofstream(dir / "config.json") << R"({"auths":{")" << registry << R"(":{"auth":")" << auth << R"("}}})";
    return "DOCKER_CONFIG=" + dir.string();
  };
  auto name = unique("login");
  started_.push_back(name);
  auto push = "run --build --registry " + registry + "/logins --attach --name " + name + " -- " + FIBER_TEST_EXIT_WITH +
              " 0 pushed";
  auto none = fiber_cmd(push, config("none", ""));
  EXPECT_EQ(none.code, 125) << none.out;
  EXPECT_NE(none.out.find("registry " + registry + " wants credentials"), std::string::npos) << none.out;
  EXPECT_NE(none.out.find("`docker login " + registry + "`"), std::string::npos) << none.out;
  auto wrong = fiber_cmd(push, config("wrong", "ZmliZXI6d3Jvbmc="));  // fiber:wrong
  EXPECT_EQ(wrong.code, 125) << wrong.out;
  EXPECT_NE(wrong.out.find("refused the credentials of user fiber from"), std::string::npos) << wrong.out;
  auto right = fiber_cmd(push, config("right", "ZmliZXI6ZmliZXItdGVzdC1zZWNyZXQ="));  // fiber:fiber-test-secret
  EXPECT_EQ(right.code, 0) << right.out;
  EXPECT_NE(right.out.find("argument 2: pushed"), std::string::npos) << right.out;
  EXPECT_NE(right.out.find("image " + registry + "/logins/exit-with@sha256:"), std::string::npos) << right.out;
}

TEST_F(fiber_command, attach_exits_with_the_masters_exit_code) {
  auto name = unique("exit3");
  started_.push_back(name);
  auto r = fiber_cmd("run --build --attach --name " + name + " -- " + FIBER_TEST_EXIT_WITH + " 3 hello");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("argument 2: hello"), std::string::npos) << r.out;
}

// The engine starts a durable master's container again after it died (its restart policy from
// --restarts); the run's files sit in a volume that is a folder of this host, where the test
// reads the journal and opens the gate.
TEST_F(fiber_command, a_durable_master_killed_mid_map_is_started_again_by_the_engine_and_takes_its_run_up) {
  auto name = unique("durable");
  fiber_test::durable_case c(name);
  auto folder = c.gate().parent_path();
  asio::io_context io;
  fiber::detail::docker_engine engine(io);
  fiber::detail::http_client http(io);
  auto volume = [&](const std::string& method, const std::string& path, std::string body) {
    auto req = engine.request(method, path);
    req.headers.emplace_back("Content-Type", "application/json");
    req.body = std::move(body);
    std::optional<int> status;
    http.start(std::move(req), [&](std::error_code, fiber::detail::http_response r) { status = r.status; });
    fiber::detail::run_until(io, [&] { return status.has_value(); });
    return *status;
  };
  ASSERT_EQ(volume("POST", "/volumes/create",
                   R"({"Name":")" + name + R"(","Driver":"local","DriverOpts":{"type":"none","o":"bind","device":")" +
                       folder.string() + R"("}})"),
            201);
  struct removed_at_end {
    std::function<void()> f;
    ~removed_at_end() { f(); }
  } volume_gone{[&] {
    fiber_cmd("stop " + name);
    volume("DELETE", "/volumes/" + name, "");
  }};
  auto r = fiber_cmd("run --build --name " + name + " -v " + name + ":/durable --env FIBER_JOURNAL_DIR=/durable/journals " +
                     "--durable --restarts 1 -- " + FIBER_TEST_DURABLE_PROGRAM + " /durable/executions /durable/gate");
  ASSERT_EQ(r.code, 0) << r.out;
  fiber_test::wait_for_results(c.journals(), 2, 4);
  c.wait_for_both_at_the_gate();
  // The journal names the workers (synced within journal_sync_ms): the master the engine starts
  // again can take them up.
  fiber_test::wait_for_workers_journaled(fiber_test::only_journal(c.journals()), 2);
  auto old = c.workers();
  // SIGKILL to the container's first process from this host, as the kernel's OOM killer would
  // (`docker kill` would count as stopping it by hand, which the engine does not restart).
  auto ids = containers("fiber.run", name);
  ASSERT_EQ(ids.size(), 1u);
  auto pid = fiber_test::run_engine<int>(io, [&](auto done) { engine.containers().pid(ids[0], std::move(done)); });
  ASSERT_GT(pid.value, 0) << pid.why;
  ASSERT_EQ(::kill(pid.value, SIGKILL), 0);
  // Its workers, containers beside it, wait for the master the engine starts again.
  fiber_test::durable_case::wait_for_end(fiber_test::durable_case::masters(old));
  c.wait_for_a_new_master(old);
  auto ps = fiber_cmd("ps");
  auto row = fiber_test::ps_row(ps.out, name);
  EXPECT_NE(row.find("running"), std::string::npos) << ps.out;
  EXPECT_NE(row.find("restart 1"), std::string::npos) << "ps does not say the master was started again: " << ps.out;
  c.open_gate();
  auto logs = fiber_cmd("logs -f " + name);
  EXPECT_EQ(logs.code, 0) << logs.out;
  EXPECT_NE(logs.out.find("taken up again from its journal"), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find(fiber_test::uninterrupted), std::string::npos) << logs.out;
  fiber_test::expect_nothing_twice(c.executions());  // the master started again took its workers up
  fiber_test::durable_case::wait_for_end(old);        // and they ended with the run
}

TEST_F(fiber_command, ps_logs_and_stop_follow_a_detached_run_and_stop_leaves_nothing) {
  auto name = unique("held");
  started_.push_back(name);
  auto r = fiber_cmd("run --build --name " + name + " -- " FIBER_TEST_ORPHAN_MASTER);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(name), std::string::npos) << r.out;
  // It prints its child's pid once the child runs.
  auto line = first_output(name);
  ASSERT_FALSE(line.empty()) << "the master printed nothing";
  auto ps = fiber_cmd("ps");
  EXPECT_EQ(ps.code, 0) << ps.out;
  auto row = ps.out.substr(ps.out.find(name));
  row = row.substr(0, row.find('\n'));
  EXPECT_NE(row.find("running"), std::string::npos) << ps.out;
  EXPECT_TRUE(row.ends_with(" 1")) << "one running worker: " << row;
  auto logs = fiber_cmd("logs " + name);
  EXPECT_NE(logs.out.find(line.substr(0, line.find('\n'))), std::string::npos) << logs.out;
  // Started without --dashboard: there is no page to relay, and the command says how to have one.
  auto page = fiber_cmd("dashboard " + name);
  EXPECT_EQ(page.code, 125);
  EXPECT_NE(page.out.find("printed no dashboard address: start the run with `fiber run --dashboard`"), std::string::npos)
      << page.out;
  auto stopped = fiber_cmd("stop " + name);
  EXPECT_EQ(stopped.code, 0) << stopped.out;
  EXPECT_TRUE(containers("fiber.run", name).empty());
  auto again = fiber_cmd("ps");
  EXPECT_EQ(again.out.find(name), std::string::npos) << again.out;
  started_.clear();
}

TEST_F(fiber_command, dashboard_serves_a_runs_page_here_relayed_to_its_master_container) {
  auto name = unique("page");
  started_.push_back(name);
  ASSERT_EQ(fiber_cmd("run --build --dashboard --name " + name + " -- " FIBER_TEST_ORPHAN_MASTER).code, 0);
  // Its child's pid: the child runs (its page's address came before).
  ASSERT_FALSE(fiber_test::line_of({"logs", "-f", name}, fiber_test::a_pid).empty()) << "the master printed no pid";
  fiber_test::expect_orphan_masters_page(fiber_test::through_dashboard({"dashboard", name}), "docker");
}

TEST_F(fiber_command, logs_follow_returns_when_the_run_ends_with_all_its_output) {
  auto name = unique("logs");
  started_.push_back(name);
  auto r = fiber_cmd("run --build --name " + name + " -- " + FIBER_TEST_EXIT_WITH + " 0 first second");
  ASSERT_EQ(r.code, 0) << r.out;
  auto logs = fiber_cmd("logs -f " + name);
  EXPECT_EQ(logs.code, 0) << logs.out;
  EXPECT_NE(logs.out.find("argument 2: first"), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("argument 3: second"), std::string::npos) << logs.out;
}

TEST_F(fiber_command, gc_removes_what_a_killed_master_left) {
  auto name = unique("killed");
  started_.push_back(name);
  ASSERT_EQ(fiber_cmd("run --build --name " + name + " -- " FIBER_TEST_ORPHAN_MASTER).code, 0);
  ASSERT_FALSE(first_output(name).empty());
  auto master = containers("fiber.run", name);
  ASSERT_EQ(master.size(), 1u);
  // SIGKILL: the master cleans up nothing; its worker stays.
  asio::io_context io;
  fiber::detail::docker_engine engine(io);
  ASSERT_FALSE(fiber_test::run_engine<bool>(io, [&](auto done) { engine.containers().kill(master[0], 9, std::move(done)); }).ec);
  ASSERT_FALSE(fiber_test::run_engine<int>(io, [&](auto done) { engine.containers().wait(master[0], std::move(done)); }).ec);
  auto workers = [&] {
    std::vector<std::string> out;
    auto all = fiber_test::run_engine<std::vector<fiber::detail::container_summary>>(
        io, [&](auto done) { engine.containers().list_labeled("fiber.master", std::move(done)); });
    for (auto& c : all.value)
      if (c.labels["fiber.master"].starts_with(name + ":")) out.push_back(c.id);
    return out;
  };
  ASSERT_EQ(workers().size(), 1u) << "the killed master's worker";
  auto gc = fiber_cmd("gc");
  EXPECT_EQ(gc.code, 0) << gc.out;
  EXPECT_NE(gc.out.find("removing ended run " + name), std::string::npos) << gc.out;
  EXPECT_TRUE(workers().empty()) << gc.out;
  EXPECT_TRUE(containers("fiber.run", name).empty()) << gc.out;
  started_.clear();
}

TEST_F(fiber_command, cp_round_trips_a_folder_through_a_claim_and_leaves_no_helper) {
  auto claim = unique("claim");
  asio::io_context io;
  fiber::detail::docker_engine engine(io);
  ASSERT_FALSE(fiber_test::run_engine<bool>(io, [&](auto done) { engine.volumes().create(claim, std::move(done)); }).ec);
  auto dir = fiber_test::run_folder() / claim;
  fs::create_directories(dir / "results" / "deep");
  std::ofstream(dir / "results" / "a.txt") << "alpha\n";
  std::ofstream(dir / "results" / "deep" / "b.bin") << std::string(100000, 'b');
  fs::permissions(dir / "results" / "deep", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  auto in = fiber_cmd("cp " + (dir / "results").string() + " " + claim + ":/runs/");
  ASSERT_EQ(in.code, 0) << in.out;
  auto out = fiber_cmd("cp " + claim + ":/runs/results " + (dir / "back").string());
  ASSERT_EQ(out.code, 0) << out.out;
  auto read = [](const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  EXPECT_EQ(read(dir / "back" / "a.txt"), "alpha\n");
  EXPECT_EQ(read(dir / "back" / "deep" / "b.bin"), std::string(100000, 'b'));
  EXPECT_EQ(fs::status(dir / "back" / "deep").permissions() & fs::perms::all,
            fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  // One file, into an existing folder under its own name.
  fs::create_directories(dir / "one");
  ASSERT_EQ(fiber_cmd("cp " + claim + ":/runs/results/a.txt " + (dir / "one").string()).code, 0);
  EXPECT_EQ(read(dir / "one" / "a.txt"), "alpha\n");
  EXPECT_TRUE(containers("fiber.helper", "cp").empty()) << "the helper container is removed";
  auto missing = fiber_cmd("cp " + claim + ":/no/such " + dir.string());
  EXPECT_EQ(missing.code, 125);
  EXPECT_NE(missing.out.find("claim " + claim + " has no 'no/such'"), std::string::npos) << missing.out;
  EXPECT_TRUE(containers("fiber.helper", "cp").empty()) << "removed after a failure too";
  fiber_test::run_engine<bool>(io, [&](auto done) { engine.volumes().remove(claim, std::move(done)); });
}

// A master that is not a `fiber run` (a program started here) killed with SIGKILL leaves its
// worker's container; `fiber gc` removes it, as the next master here would.
TEST_F(fiber_command, gc_removes_the_containers_of_a_master_killed_on_this_host) {
  asio::io_context io;
  fiber::detail::docker_engine engine(io);
  ASSERT_EQ(fiber_test::prepare_test_image(io, engine), "");
  std::string build = FIBER_TEST_BUILD_DIR;
  std::vector<std::string> env{"FIBER_BACKEND=docker", std::string("FIBER_IMAGE=") + fiber_test::test_image,
                               "FIBER_VOLUMES=/usr:/usr:ro,/tmp:/tmp," + build + ":" + build + ":ro"};
  for (char** e = environ; *e; ++e)
    if (!std::string_view(*e).starts_with("FIBER_")) env.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  char* argv[] = {const_cast<char*>(FIBER_TEST_ORPHAN_MASTER), nullptr};
  pid_t master = 0;
  ASSERT_EQ(posix_spawn(&master, FIBER_TEST_ORPHAN_MASTER, &actions, nullptr, argv, envp.data()), 0);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  char line[32] = {};
  ASSERT_GT(::read(out[0], line, sizeof line - 1), 0) << "the master printed its child's pid";
  ::close(out[0]);
  ::kill(master, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(master, &status, 0), master);
  auto owner = fiber_test::master_label();
  owner = owner.substr(0, owner.rfind(':') + 1) + std::to_string(master);
  ASSERT_EQ(fiber_test::containers_of(owner).size(), 1u) << "the killed master's worker";
  auto gc = fiber_cmd("gc");
  EXPECT_EQ(gc.code, 0) << gc.out;
  EXPECT_NE(gc.out.find("of ended master " + owner), std::string::npos) << gc.out;
  EXPECT_TRUE(fiber_test::containers_of(owner).empty()) << gc.out;
}

TEST_F(fiber_command, dry_run_prints_the_container_and_creates_nothing) {
  auto name = unique("dry");
  auto r = fiber_cmd("run --build --dry-run --cpu 2 --memory 512M -v data:/data:ro --env A=1 --name " + name + " -- " +
                     FIBER_TEST_EXIT_WITH + " 7");
  ASSERT_EQ(r.code, 0) << r.out;
  auto plan = boost::json::parse(r.out).as_object();
  auto& create = plan.at("create").as_object();
  EXPECT_EQ(create.at("HostConfig").at("NanoCpus").as_int64(), 2000000000);
  EXPECT_EQ(create.at("HostConfig").at("Memory").as_int64(), 512LL << 20);
  auto env = boost::json::serialize(create.at("Env"));
  EXPECT_NE(env.find("FIBER_BACKEND=docker"), std::string::npos) << env;
  EXPECT_NE(env.find("FIBER_VOLUMES=data:/data:ro"), std::string::npos) << env;
  EXPECT_NE(env.find("A=1"), std::string::npos) << env;
  EXPECT_EQ(plan.at("build").at("context_sha256").as_string().size(), 64u);
  EXPECT_EQ(plan.at("build").at("context").as_string(), "generated: the program and its libraries")
      << "no Dockerfile here: the image of the program itself";
  EXPECT_TRUE(containers("fiber.run", name).empty());
}

TEST_F(fiber_command, build_args_reach_the_build_and_tell_images_apart) {
  auto dir = fiber_test::run_folder() / unique("args");
  fs::create_directories(dir);
  std::ofstream(dir / "Dockerfile") << "FROM scratch\nARG TARGET\nCOPY ${TARGET} /app/\n";
  std::ofstream(dir / "a.txt") << "a";
  auto plan = [&](const std::string& args) {
    auto r = fiber_cmd("run --dry-run --context " + dir.string() + " " + args + " -- /app/x");
    EXPECT_EQ(r.code, 0) << r.out;
    return boost::json::parse(r.out).at("build").as_object();
  };
  auto a = plan("--build-arg TARGET=a.txt"), b = plan("--build-arg TARGET=b.txt"), none = plan("");
  EXPECT_EQ(a.at("build_args").at("TARGET").as_string(), "a.txt");
  EXPECT_NE(a.at("tag"), b.at("tag")) << "other arguments, another image";
  EXPECT_NE(a.at("tag"), none.at("tag"));
  EXPECT_EQ(a.at("tag"), plan("--build-arg TARGET=a.txt").at("tag")) << "the same ones, the same tag";
  // They reach the builder: a file the argument names that is not there fails with its words.
  auto r = fiber_cmd("run --context " + dir.string() + " --build-arg TARGET=missing.txt -- /app/x");
  EXPECT_EQ(r.code, 125) << r.out;
  EXPECT_NE(r.out.find("missing.txt"), std::string::npos) << r.out;
}

TEST_F(fiber_command, bad_input_is_an_error_that_names_the_problem_and_the_fix) {
  auto expect_error = [](const command_outcome& r, const std::string& words) {
    EXPECT_EQ(r.code, 125) << r.out;
    EXPECT_NE(r.out.find(words), std::string::npos) << r.out;
  };
  expect_error(fiber_cmd("run --image fiber-test-no-such-image:1 -- /bin/true"), "is not on the Docker engine");
  expect_error(fiber_cmd("run --build -- /bin/true", "DOCKER_HOST=unix:///nonexistent.sock"),
               "cannot reach the Docker engine at unix:///nonexistent.sock");
  expect_error(fiber_cmd("run --build --registry 127.0.0.1:1/x -- " FIBER_TEST_EXIT_WITH), "pushing 127.0.0.1:1/x");
  expect_error(fiber_cmd("run --context /tmp -- /bin/true"), "no image to run: pass --image IMAGE, or --build");
  expect_error(fiber_cmd("run --build -v /abs/path -- " FIBER_TEST_EXIT_WITH), "is not CLAIM[:PATH][:ro]");
  expect_error(fiber_cmd("run --build --memory lots -- " FIBER_TEST_EXIT_WITH), "--memory lots is not a size");
  expect_error(fiber_cmd("run --image x --build -- /bin/true"), "--image and --build exclude each other");
  expect_error(fiber_cmd("logs no-such-run-here"), "no run named 'no-such-run-here'");
  expect_error(fiber_cmd("stop no-such-run-here"), "`fiber ps` lists yours");
  expect_error(fiber_cmd("run --name 'bad name!' --build -- " FIBER_TEST_EXIT_WITH), "is not usable");
  expect_error(fiber_cmd("ps --backend local"), "runs on an engine");
  expect_error(fiber_cmd("cp /etc/hostname no-such-volume-here:/x"), "no volume named 'no-such-volume-here'");
  expect_error(fiber_cmd("cp a b"), "one side as CLAIM:PATH");
  expect_error(fiber_cmd("cp --program /app/x /etc/hostname some-volume:/x"),
               "--image and --program choose the helper pod of fiber cp on Kubernetes");
  expect_error(fiber_cmd("run --build --build-arg A=1 -- " FIBER_TEST_EXIT_WITH), "--build-arg needs a Dockerfile");
  expect_error(fiber_cmd("run --image x --build-arg A -- /bin/true"), "--build-arg A is not KEY=VALUE");
  auto unknown = fiber_cmd("run --no-such-flag -- /bin/true");
  EXPECT_NE(unknown.code, 0);
  EXPECT_NE(unknown.out.find("--no-such-flag"), std::string::npos) << unknown.out;
}
