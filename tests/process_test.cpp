// fiber::process on the local backend: real child processes; starting, ending, exit codes, errors,
// names and config. Its lifetime against its master and threads: process_lifetime_test.
#include "process_support.hpp"

#include <iterator>
#include "run_folder.hpp"

namespace {
int unregistered(int x) { return x; }

// The environment the engine started this child with (its first one, as /proc shows it, which is
// what the engine shows readers of the spec: `docker inspect`, `kubectl get pod`, `scontrol show
// job`; a local child forked by the fork server shows the server's): the names of the variables
// whose value is credentials.
std::string credentials_in_first_environment(int) {
  std::ifstream f("/proc/self/environ", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::string seen;
  for (std::size_t at = 0; at < all.size();) {
    auto end = all.find('\0', at);
    if (end == std::string::npos) end = all.size();
    std::string_view entry(all.data() + at, end - at);
    auto eq = entry.find('=');
    auto name = entry.substr(0, eq), value = eq == entry.npos ? std::string_view() : entry.substr(eq + 1);
    if (value.starts_with("curve,") || value.starts_with("plain,")) seen += std::string(name) + " ";
    at = end + 1;
  }
  return seen;
}
}  // namespace
FIBER_REMOTE(credentials_in_first_environment);

// A reader of the namespace (pods' specs), a member of the docker group (docker inspect), another
// user of the cluster (scontrol show job) sees a child's environment: it holds where the child's
// credentials are, never the credentials.
TEST(process, a_childs_environment_holds_where_its_credentials_are_never_the_credentials) {
  fiber::pool p(1);
  EXPECT_EQ(p.apply(&credentials_in_first_environment, 0).get(), "");
}

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

TEST(process, children_on_other_hosts_reach_the_master_over_tls_unless_zeromq_is_asked) {
  if (fiber_test::backend_under_test() == "local") FIBER_TEST_BACKEND_GATED("children on other hosts only (docker, slurm, kubernetes)");
  for (auto [transport, scheme] : {std::pair{"direct", "tls://"}, std::pair{"zeromq", "tcp://"}}) {
    fiber::context ctx(fiber::config::load({{"remote_transport", transport}}));
    fiber::process p(ctx, &do_nothing);
    p.start().get();
    p.join().get();
    EXPECT_EQ(p.exitcode(), 0) << transport;
    EXPECT_TRUE(ctx.endpoints().at(0).starts_with(scheme)) << transport << ": " << ctx.endpoints().at(0);
  }
}

TEST(process, remote_transport_hub_links_children_through_tls_too) {
  // Where the backend can start a hub on each host (Slurm) the children link to it
  // (slurm_backend_test); elsewhere they link to the master directly, over TLS.
  if (fiber_test::backend_under_test() == "local") FIBER_TEST_BACKEND_GATED("children on other hosts only (docker, slurm, kubernetes)");
  fiber::context ctx(fiber::config::load({{"remote_transport", "hub"}}));
  fiber::process p(ctx, &do_nothing);
  p.start().get();
  p.join().get();
  EXPECT_EQ(p.exitcode(), 0);
  EXPECT_TRUE(ctx.endpoints().at(0).starts_with("tls://")) << ctx.endpoints().at(0);
}

TEST(process, a_child_whose_host_has_no_hub_links_to_its_master_directly) {
  FIBER_TEST_LOCAL_ONLY("names a hub for this host's children through the master's environment");
  // As a child on a node whose hub is not running is told to link to one.
  ::setenv("FIBER_WORKER_HUB", "fiber-hub-that-nobody-runs", 1);
  fiber::process p(&do_nothing);
  p.start().get();
  p.join().get();
  ::unsetenv("FIBER_WORKER_HUB");
  EXPECT_EQ(p.exitcode(), 0);
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
  auto prefix = fiber_test::run_folder() / ("fiber-log-" + std::to_string(getpid()));
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
