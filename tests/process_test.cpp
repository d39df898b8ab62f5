// fiber::process on the local backend: real child processes.
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include "docker_support.hpp"
#include "co_test.hpp"
#include "slurm_support.hpp"
#include "kubernetes_support.hpp"
#include "runtime/job_security.hpp"
#include "support.hpp"

#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <csignal>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <fstream>
#include <sstream>

namespace {
void do_nothing() {}
void fail_with(std::string message) { throw std::runtime_error(message); }
void exit_with(int code) { std::exit(code); }
// Blocks until something arrives on `gate`: a child that is "busy" without sleeping.
void wait_on(fiber::simple_queue<int> gate) { (void)gate.get().get(); }
void report_identity(fiber::simple_queue<std::string> out) {
  auto me = fiber::current_process();
  out.put(me.name + " " + std::to_string(me.pid) + " " + (me.is_worker ? "worker" : "master")).get();
}
void report_config(fiber::simple_queue<std::vector<std::pair<std::string, std::string>>> out) {
  out.put(fiber::context::default_context().config().items()).get();
}
int unregistered(int x) { return x; }
// Ignores SIGTERM, then waits on the gate: only SIGKILL ends it early.
void ignore_sigterm_and_wait(fiber::simple_queue<int> gate, fiber::simple_queue<int> ready) {
  std::signal(SIGTERM, SIG_IGN);
  ready.put(1).get();
  (void)gate.get().get();
}
void crash() { std::abort(); }
// Fails unless it sees exactly the devices its FIBER_META asked for (local backend: from 0).
void expect_two_gpus() {
  auto* v = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!v || std::string(v) != "0,1") throw std::runtime_error(std::string("sees ") + (v ? v : "no devices"));
}
// Tries to start a process from inside a worker; reports the error and whether it looks alive.
void start_from_worker(fiber::simple_queue<std::string> out) {
  fiber::process p(&crash);
  std::string report;
  try {
    p.start().get();
    report = "started";
  } catch (const fiber::error& e) {
    report = e.what();
  }
  out.put(report + (p.is_alive() ? " | alive" : " | not alive")).get();
}
void raise_usr1() { std::raise(SIGUSR1); }  // default action: terminate
// Threads and a recursive mutex in a child (a forked child must have sane thread state).
void use_threads(fiber::simple_queue<int> out) {
  std::recursive_mutex m;
  int total = 0;
  std::vector<std::thread> ts;
  for (int i = 1; i <= 4; ++i)
    ts.emplace_back([&, i] {
      std::lock_guard a(m);
      std::lock_guard b(m);
      total += i;
    });
  for (auto& t : ts) t.join();
  out.put(total).get();
}
// A move-only parameter by value: the decoded argument is moved into it in the child.
void take_ownership(std::unique_ptr<std::string> s, fiber::simple_queue<std::string> out) {
  auto mine = std::move(s);
  out.put(mine ? *mine + "!" : "(none)").get();
}
}  // namespace
FIBER_REMOTE(do_nothing);
FIBER_REMOTE(fail_with);
FIBER_REMOTE(exit_with);
FIBER_REMOTE(wait_on);
FIBER_REMOTE(report_identity);
FIBER_REMOTE(report_config);
FIBER_REMOTE(ignore_sigterm_and_wait);
FIBER_REMOTE(crash);
FIBER_REMOTE(start_from_worker);
FIBER_REMOTE(raise_usr1);
FIBER_REMOTE(use_threads);
FIBER_REMOTE(take_ownership);
FIBER_REMOTE(expect_two_gpus);
FIBER_META(expect_two_gpus, .gpu = 2);

TEST(process, a_move_only_argument_is_moved_into_the_childs_parameter) {
  fiber::simple_queue<std::string> out;
  fiber::process a(&take_ownership, std::make_unique<std::string>("mine"), out);
  a.start().get();
  EXPECT_EQ(out.get().get(), "mine!");
  fiber::process b(&take_ownership, std::unique_ptr<std::string>(), out);
  b.start().get();
  EXPECT_EQ(out.get().get(), "(none)");
  a.join().get();
  b.join().get();
  EXPECT_EQ(a.exitcode(), 0);
}

TEST(process, exit_code_zero) {
  fiber::process p(&do_nothing);
  EXPECT_FALSE(p.exitcode());
  p.start().get();
  p.join().get();
  ASSERT_TRUE(p.exitcode());
  EXPECT_EQ(*p.exitcode(), 0);
}

TEST(process, exception_in_target_gives_non_zero_exit_code) {
  fiber::process p(&fail_with, std::string("boom"));
  p.start().get();
  p.join().get();
  EXPECT_EQ(p.exitcode(), 1);
}

TEST(process, exception_type_and_message_come_back) {
  fiber::process p(&fail_with, std::string("the detail"));
  p.set_name("thrower");
  p.start().get();
  p.join().get();
  auto e = p.exception();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type(), "std::runtime_error");
  EXPECT_EQ(e->message(), "the detail");
  EXPECT_EQ(e->where(), "thrower");
  EXPECT_EQ(e->code(), fiber::errc::remote_error);

  fiber::process ok(&do_nothing);
  ok.start().get();
  ok.join().get();
  EXPECT_FALSE(ok.exception());
}

TEST(process, exit_code_of_the_target_is_kept) {
  fiber::process p(&exit_with, 7);
  p.start().get();
  p.join().get();
  EXPECT_EQ(p.exitcode(), 7);
}

TEST(process, join_with_timeout_and_is_alive_before_while_after) {
  fiber::simple_queue<int> gate;
  fiber::process p(&wait_on, gate);
  EXPECT_FALSE(p.is_alive());
  p.start().get();
  EXPECT_TRUE(p.is_alive());
  EXPECT_FALSE(p.join(std::chrono::milliseconds(50)).get());  // still waiting on the gate
  EXPECT_TRUE(p.is_alive());
  EXPECT_FALSE(p.exitcode());
  gate.put(1).get();
  EXPECT_TRUE(p.join(std::chrono::minutes(1)).get());
  EXPECT_FALSE(p.is_alive());
  EXPECT_EQ(p.exitcode(), 0);
}

TEST(process, terminate_stops_a_busy_child) {
  fiber::simple_queue<int> gate;
  fiber::process p(&wait_on, gate);
  p.start().get();
  p.terminate().get();
  EXPECT_FALSE(p.is_alive());
  EXPECT_EQ(p.exitcode(), -SIGTERM);
}

TEST(process, terminate_escalates_to_sigkill_after_the_grace_period) {
  fiber::context ctx(fiber::config::load({{"terminate_grace_ms", "50"}}));
  fiber::simple_queue<int> gate(ctx), ready(ctx);
  fiber::process p(ctx, &ignore_sigterm_and_wait, gate, ready);
  p.start().get();
  (void)ready.get().get();  // SIGTERM is ignored from here on
  p.terminate().get();
  EXPECT_EQ(p.exitcode(), -SIGKILL);
}

TEST(process, child_killed_by_a_signal_reports_minus_the_signal) {
  fiber::process p(&crash);
  p.start().get();
  p.join().get();
  EXPECT_EQ(p.exitcode(), -SIGABRT);
}

TEST(process, child_can_signal_itself_and_run_threads_under_both_start_methods) {
  for (auto method : {"forkserver", "spawn"}) {
    fiber::context ctx(fiber::config::load({{"start_method", method}}));
    fiber::process p(ctx, &raise_usr1);
    p.start().get();
    p.join().get();
    EXPECT_EQ(p.exitcode(), -SIGUSR1) << method;
    fiber::simple_queue<int> out(ctx);
    fiber::process q(ctx, &use_threads, out);
    q.start().get();
    EXPECT_EQ(out.get().get(), 10) << method;
    q.join().get();
    EXPECT_EQ(q.exitcode(), 0) << method;
  }
}

TEST(process, child_that_dies_before_its_handshake_fails_start) {
  fiber::context ctx(fiber::config::load({{"executable", "/bin/false"}}));
  fiber::process p(ctx, &do_nothing);
  fiber_test::expect_error([&] { p.start().get(); }, fiber::errc::spawn_failed, "before its handshake");
  EXPECT_FALSE(p.is_alive());
  EXPECT_EQ(p.exitcode(), 1);
}

TEST(process, child_is_started_with_the_needs_of_its_function) {
  FIBER_TEST_LOCAL_ONLY("the test's Docker engine has no GPUs (docker_backend tests check the request)");
  fiber::process p(&expect_two_gpus);
  p.start().get();
  p.join().get();
  EXPECT_FALSE(p.exception()) << p.exception()->what();
  EXPECT_EQ(p.exitcode(), 0);
}

TEST(process, names_and_pids) {
  fiber::process a(&do_nothing), b(&do_nothing);
  EXPECT_NE(a.name(), b.name());
  EXPECT_EQ(a.pid(), 0);
  b.set_name("custom");
  EXPECT_EQ(b.name(), "custom");
  a.start().get();
  b.start().get();
  EXPECT_GT(a.pid(), 0);
  if (!fiber_test::on_kubernetes()) EXPECT_NE(a.pid(), b.pid());  // pods: a pid namespace each
  EXPECT_THROW(a.set_name("late"), fiber::error);
  a.join().get();
  b.join().get();
}

TEST(process, child_knows_its_name_and_pid) {
  fiber::simple_queue<std::string> out;
  fiber::process p(&report_identity, out);
  p.set_name("reporter");
  p.start().get();
  auto text = out.get().get();
  p.join().get();
  if (fiber_test::on_docker() || fiber_test::on_kubernetes())  // it sees its pid in its own namespace
    EXPECT_TRUE(text.starts_with("reporter ") && text.ends_with(" worker") && p.pid() > 0) << text;
  else
    EXPECT_EQ(text, "reporter " + std::to_string(p.pid()) + " worker");
  EXPECT_EQ(fiber::current_process().name, "MainProcess");
  EXPECT_FALSE(fiber::current_process().is_worker);
}

TEST(process, three_at_once) {
  fiber::simple_queue<int> gate;
  std::vector<fiber::process> ps;
  for (int i = 0; i < 3; ++i) ps.emplace_back(&wait_on, gate);
  for (auto& p : ps) p.start().get();
  auto children = fiber::active_children();
  for (auto& p : ps) {
    EXPECT_TRUE(p.is_alive());
    EXPECT_NE(std::find(children.begin(), children.end(), p.pid()), children.end());
  }
  for (int i = 0; i < 3; ++i) gate.put(i).get();
  for (auto& p : ps) p.join().get();
  for (auto& p : ps) EXPECT_EQ(p.exitcode(), 0);
  EXPECT_TRUE(fiber::active_children().empty());
}

TEST(process, cpu_count_is_positive) { EXPECT_GE(fiber::cpu_count(), 1); }

TEST(process, child_config_equals_parent_config) {
  fiber::simple_queue<std::vector<std::pair<std::string, std::string>>> out;
  fiber::process p(&report_config, out);
  p.start().get();
  auto child_items = out.get().get();
  p.join().get();
  EXPECT_EQ(child_items, fiber::context::default_context().config().items());
}

TEST(process, child_config_follows_a_non_default_parent_config) {
  auto cfg = fiber::config::load({{"mem_per_job", "123"}, {"heartbeat_interval_ms", "777"}});
  fiber::context ctx(cfg);
  fiber::simple_queue<std::vector<std::pair<std::string, std::string>>> out(ctx);
  fiber::process p(ctx, &report_config, out);
  p.start().get();
  auto child_items = out.get().get();
  p.join().get();
  EXPECT_EQ(child_items, cfg.items());
}

TEST(process, unregistered_function_fails_before_anything_starts) {
  fiber_test::expect_error([&] { fiber::process p(&unregistered, 1); }, fiber::errc::not_registered, "FIBER_REMOTE");
  EXPECT_TRUE(fiber::active_children().empty());
}

TEST(process, misuse_is_reported) {
  fiber::process p(&do_nothing);
  EXPECT_THROW(p.join().get(), fiber::error);
  EXPECT_THROW(p.terminate().get(), fiber::error);
  p.start().get();
  fiber_test::expect_error([&] { p.start().get(); }, fiber::errc::already_started);
  p.join().get();
}

TEST(process, exception_message_lands_in_the_childs_log_file) {
  auto prefix = std::filesystem::temp_directory_path() / ("fiber-log-" + std::to_string(getpid()));
  fiber::context ctx(fiber::config::load({{"log_file", prefix.string()}}));
  fiber::process p(ctx, &fail_with, std::string("the reason it failed"));
  p.set_name("failing-child");
  p.start().get();
  p.join().get();
  EXPECT_EQ(p.exitcode(), 1);
  auto path = prefix.string() + ".failing-child.log";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("std::runtime_error: the reason it failed"), std::string::npos) << text.str();
  std::filesystem::remove(path);
}

TEST(process, destroying_a_running_process_kills_and_reaps_it) {
  fiber::simple_queue<int> gate;
  int pid = 0;
  {
    fiber::process p(&wait_on, gate);
    p.start().get();
    pid = p.pid();
  }
  // The listener of test_main fails the test if the child is still there.
  EXPECT_NE(pid, 0);
  EXPECT_TRUE(fiber::active_children().empty());
}

// Probing found a process whose arguments exceeded max_message_bytes started and then never ran.
TEST(process, arguments_over_the_limit_fail_start_and_name_the_key) {
  fiber::context ctx(fiber::config::load({{"max_message_bytes", "1000"}}));
  fiber::process p(ctx, &fail_with, std::string(5000, 'x'));
  fiber_test::expect_error([&] { p.start().get(); }, fiber::errc::message_too_large,
                           {"arguments of", "max_message_bytes (1000)", "FIBER_MAX_MESSAGE_BYTES"});
  EXPECT_TRUE(fiber_test::child_pids().empty());  // nothing was started
}

TEST(process, missing_executable_is_a_clear_error) {
  fiber::context ctx(fiber::config::load({{"executable", "/nonexistent/worker"}}));
  fiber::process p(ctx, &do_nothing);
  fiber_test::expect_error([&] { p.start().get(); }, fiber::errc::spawn_failed, "/nonexistent/worker");
}

TEST(process, binary_mismatch_is_refused) {
  fiber::context ctx(fiber::config::load({{"executable", FIBER_TEST_OTHER_BINARY}}));
  fiber::process p(ctx, &do_nothing);
  fiber_test::expect_error([&] { p.start().get(); }, fiber::errc::binary_mismatch, {"other_binary", "build-id"});
  p.join().get();  // the refused worker exits by itself
  EXPECT_EQ(p.exitcode(), 3);
}

// The awaitable API on the caller's own io_context (a service embedding fiber).
FIBER_CO_TEST(process, awaitable_api_on_the_callers_io_context) {
  fiber::simple_queue<std::string> out(ctx);
  fiber::process a(ctx, &report_identity, out), b(ctx, &report_identity, out);
  co_await a.start();
  co_await b.start();
  EXPECT_FALSE((co_await out.get()).empty());
  EXPECT_FALSE((co_await out.get()).empty());
  co_await a.join();
  co_await b.join();
  EXPECT_EQ(a.exitcode(), 0);
  EXPECT_EQ(b.exitcode(), 0);
}

TEST(process, children_die_with_their_master) {
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  char* argv[] = {const_cast<char*>(FIBER_TEST_ORPHAN_MASTER), nullptr};
  pid_t master = 0;
  ASSERT_EQ(posix_spawn(&master, FIBER_TEST_ORPHAN_MASTER, &actions, nullptr, argv, environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  char line[32] = {};
  ASSERT_GT(read(out[0], line, sizeof line - 1), 0);
  close(out[0]);
  int child = std::atoi(line);
  ASSERT_GT(child, 0);
  // A pod's pid is its own namespace's: it names no process on this host.
  int pidfd = fiber_test::on_kubernetes() ? -1 : static_cast<int>(syscall(SYS_pidfd_open, child, 0));

  kill(master, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(master, &status, 0), master);
  if (pidfd >= 0) {  // the grandchild must end: wait for it (bounded only to avoid a hang)
    pollfd p{pidfd, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 60000), 1) << "child " << child << " outlived its master";
    close(pidfd);
  }  // else it was already gone and reaped
  if (fiber_test::on_kubernetes()) {
    // The child's pod outlives the master, but the child in it ends: its container terminates.
    // Or the pod is deleted first: a master that starts on this host meanwhile (another test's,
    // beside this one) deletes the pods of masters that are gone, which ends the child as well.
    auto owner = fiber_test::master_label();
    owner = owner.substr(0, owner.rfind(':') + 1) + std::to_string(master);
    std::set<std::string> seen;
    EXPECT_TRUE(fiber_test::await_pods("app.kubernetes.io/managed-by=fiber", [&](const auto& pods) {
      int live = 0;
      for (auto& [name, pod] : pods) {
        auto* ann = pod.at("metadata").as_object().if_contains("annotations");
        if (!ann || !ann->as_object().contains("fiber.master") || ann->at("fiber.master").as_string() != owner)
          continue;
        seen.insert(name);
        auto phase = pod.at("status").at("phase").as_string();
        if (phase != "Succeeded" && phase != "Failed") return false;
        ++live;
      }
      return live == 1 || (live == 0 && seen.size() == 1);
    })) << "the child's pod kept running after its master was killed";
  }
  if (fiber_test::on_docker() || fiber_test::on_slurm() || fiber_test::on_kubernetes()) {
    // Its container (its pod, its Slurm job, if it has not ended with it) stays until the next
    // master on this machine removes what dead masters left.
    fiber::context ctx;
    fiber::process(ctx, &do_nothing).start().get();
    auto owner = fiber_test::master_label();
    owner = owner.substr(0, owner.rfind(':') + 1) + std::to_string(master);
    if (fiber_test::on_docker()) EXPECT_TRUE(fiber_test::containers_of(owner).empty());
    if (fiber_test::on_slurm()) EXPECT_TRUE(fiber_test::live_slurm_jobs_of(owner).empty());
    if (fiber_test::on_kubernetes()) EXPECT_TRUE(fiber_test::pods_of(owner).empty());
  }
}

TEST(process, a_worker_that_never_reaches_its_master_exits) {
  FIBER_TEST_LOCAL_ONLY("the worker's side alone, whatever the backend");
  // A worker started after its master died (a pod scheduled late, a container created while
  // the pool shut down) never connects: it gives up after heartbeat_timeout_ms like a worker
  // that lost its master, instead of running until someone deletes it.
  std::string endpoint;
  {
    asio::io_context io;
    asio::ip::tcp::acceptor gone(io, {asio::ip::make_address("127.0.0.1"), 0});
    endpoint = "tcp://127.0.0.1:" + std::to_string(gone.local_endpoint().port());
  }  // closed: nothing listens there
  auto keys = fiber::detail::job_keys::generate().for_worker(false);
  std::vector<std::string> env_text{"FIBER_WORKER_ENDPOINT=" + endpoint, "FIBER_WORKER_KEYS=" + keys,
                                    "FIBER_WORKER_TOKEN=7", "FIBER_WORKER_JOB=stray", "FIBER_WORKER_NAME=Stray"};
  for (char** e = environ; *e; ++e)
    if (!std::string_view(*e).starts_with("FIBER_")) env_text.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  auto self = std::filesystem::read_symlink("/proc/self/exe").string();
  char* argv[] = {self.data(), nullptr};
  pid_t worker = 0;
  ASSERT_EQ(posix_spawn(&worker, self.c_str(), nullptr, nullptr, argv, envp.data()), 0);
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, worker, 0));
  pollfd p{pidfd, POLLIN, 0};
  bool ended = poll(&p, 1, 120000) == 1;  // bounded only to avoid a hang
  close(pidfd);
  if (!ended) kill(worker, SIGKILL);
  EXPECT_TRUE(ended) << "the worker still waits for a master that is not there";
  int status = 0;
  ASSERT_EQ(waitpid(worker, &status, 0), worker);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 70);  // exit_master_lost
}

TEST(process, both_start_methods_run_children) {
  FIBER_TEST_LOCAL_ONLY("start methods are how local children start");
  for (auto method : {"forkserver", "spawn"}) {
    fiber::context ctx(fiber::config::load({{"start_method", method}}));
    fiber::simple_queue<std::string> out(ctx);
    fiber::process p(ctx, &report_identity, out);
    p.set_name(method);
    p.start().get();
    EXPECT_EQ(out.get().get(), std::string(method) + " " + std::to_string(p.pid()) + " worker");
    p.join().get();
    EXPECT_EQ(p.exitcode(), 0) << method;
  }
}

namespace {
// Runs a shell command; its output (stdout and stderr) and exit code.
std::pair<std::string, int> run_command(const std::string& command) {
  std::string out;
  FILE* f = popen((command + " 2>&1").c_str(), "r");
  char buf[512];
  while (f && std::fgets(buf, sizeof buf, f)) out += buf;
  int status = f ? pclose(f) : -1;
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}
}  // namespace

TEST(process, a_program_without_fiber_init_cannot_start_children) {
  auto [out, code] = run_command(FIBER_TEST_NO_INIT);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("fiber::init(argc, argv) was not called"), std::string::npos) << out;
}

TEST(process, a_child_whose_main_lacks_fiber_init_stops_before_starting_anything) {
  // As fiber would start it: with the worker marker in its environment.
  auto [out, code] = run_command(std::string("FIBER_WORKER_TOKEN=1 ") + FIBER_TEST_NO_INIT);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("did not call fiber::init(argc, argv)"), std::string::npos) << out;
}

TEST(process, a_worker_starting_a_process_gets_a_clear_error) {
  fiber::simple_queue<std::string> out;
  fiber::process p(&start_from_worker, out);
  p.start().get();
  auto report = out.get().get();
  p.join().get();
  EXPECT_NE(report.find("from inside a worker is not supported"), std::string::npos) << report;
  EXPECT_NE(report.find("| not alive"), std::string::npos) << report;
  EXPECT_EQ(p.exitcode(), 0);
}

// A child's parent is a thread to Linux (PR_SET_PDEATHSIG fires when the parent *thread* ends):
// a process started from a thread that then ended was killed with it.
TEST(process, a_child_outlives_the_thread_that_started_it) {
  fiber::simple_queue<int> gate;
  fiber::process p(&wait_on, gate);
  fiber_test::run_on_a_thread_that_ends([&] { p.start().get(); });
  gate.put(1).get();
  p.join().get();
  EXPECT_EQ(p.exitcode(), 0);
}
