// fiber::process and the lives around it: a process object destroyed while its child runs, a
// master that dies, a worker that never reaches its master, programs without fiber::init, and a
// child that outlives the thread that started it.
#include "process_support.hpp"
#include "run_folder.hpp"

TEST(process, destroying_a_running_daemon_process_kills_and_reaps_it) {
  fiber::simple_queue<int> gate;
  int pid = 0;
  {
    fiber::process p(&wait_on, gate);
    p.set_daemon(true);
    p.start().get();
    pid = p.pid();
  }
  // The listener of test_main fails the test if the child is still there.
  EXPECT_NE(pid, 0);
  EXPECT_TRUE(fiber::active_children().empty());
}

// As multiprocessing: a non-daemon child (the default) whose object goes runs on, and its
// context waits for it when it ends (the literal port of `fiber.Process(target=print,
// args=('Hello',)).start()` used to print nothing 9 times in 10: the object's end killed it).
TEST(process, a_non_daemon_child_whose_object_goes_runs_on_and_its_context_waits_for_it) {
  auto marker = fiber_test::run_folder() / ("fiber-non-daemon-" + std::to_string(getpid()));
  std::filesystem::remove(marker);
  auto ctx = std::make_unique<fiber::context>();
  fiber::simple_queue<int> gate(*ctx);  // outlives the context: the child reads it to the end
  fiber::process(*ctx, &wait_then_touch, gate, marker.string()).start().get();  // its object is gone now
  gate.put(1).get();  // it still runs: it takes this, and then ends
  ctx.reset();        // the context waits for it here
  EXPECT_TRUE(std::filesystem::exists(marker));
  std::filesystem::remove(marker);
}

TEST(process, set_daemon_after_start_is_refused) {
  fiber::simple_queue<int> gate;
  fiber::process p(&wait_on, gate);
  p.start().get();
  fiber_test::expect_error([&] { p.set_daemon(true); }, fiber::errc::already_started, "before start()");
  gate.put(1).get();
  p.join().get();
}

// Probing found a process whose arguments exceeded max_message_bytes started and then never ran.
TEST(process, children_die_with_their_master) {
  pid_t master = 0;
  auto pids = start_orphan_master(nullptr, 1, master);
  ASSERT_EQ(pids.size(), 1u);
  int child = pids[0];
  ASSERT_GT(child, 0);
  // A pod's pid is its own namespace's: it names no process on this host.
  int pidfd = fiber_test::on_kubernetes() ? -1 : static_cast<int>(syscall(SYS_pidfd_open, child, 0));

  // Its pod is there before the master dies, so that its absence later means it ended.
  if (fiber_test::on_kubernetes()) ASSERT_EQ(fiber_test::pods_of(mark_of(master)).size(), 1u);
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
    // Or the pod is deleted first, even before this looks: a master that starts on this host
    // meanwhile (another test's, beside this one) deletes the pods of masters that are gone, which
    // ends the child as well. Either way no pod of the master is left running.
    auto owner = mark_of(master);
    EXPECT_TRUE(fiber_test::await_pods("app.kubernetes.io/managed-by=fiber", [&](const auto& pods) {
      for (auto& [name, pod] : pods) {
        auto* ann = pod.at("metadata").as_object().if_contains("annotations");
        if (!ann || !ann->as_object().contains("fiber.master") || ann->at("fiber.master").as_string() != owner)
          continue;
        auto phase = pod.at("status").at("phase").as_string();
        if (phase != "Succeeded" && phase != "Failed") return false;
      }
      return true;
    })) << "the child's pod kept running after its master was killed";
  }
  if (fiber_test::on_docker() || fiber_test::on_slurm() || fiber_test::on_kubernetes()) {
    // Its container (its pod, its Slurm job, if it has not ended with it) stays until the next
    // master on this machine removes what dead masters left.
    fiber::context ctx;
    fiber::process(ctx, &do_nothing).start().get();
    expect_nothing_left_of(master);
  }
}

// A master ended by an uncaught exception (std::terminate, then abort) ends its children first,
// on every backend: no container, pod or Slurm job of it is left for the heartbeat timeout and
// `fiber gc` (a master that is SIGKILLed leaves them to the next master, above).
TEST(process, a_master_ending_by_an_uncaught_exception_ends_its_children_first) {
  int out[2], err[2];
  ASSERT_EQ(pipe(out), 0);
  ASSERT_EQ(pipe(err), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  char* argv[] = {const_cast<char*>(FIBER_TEST_ORPHAN_MASTER), const_cast<char*>("throw"), nullptr};
  pid_t master = 0;
  ASSERT_EQ(posix_spawn(&master, FIBER_TEST_ORPHAN_MASTER, &actions, nullptr, argv, environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  close(err[1]);
  char line[32] = {};
  ASSERT_GT(read(out[0], line, sizeof line - 1), 0);
  close(out[0]);
  ASSERT_GT(std::atoi(line), 0);
  std::string said;
  char buf[4096];
  for (ssize_t n; (n = read(err[0], buf, sizeof buf)) > 0;) said.append(buf, static_cast<std::size_t>(n));
  close(err[0]);
  int status = 0;
  ASSERT_EQ(waitpid(master, &status, 0), master);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT) << "status " << status;
  EXPECT_NE(said.find("an uncaught exception: a config error nobody caught"), std::string::npos) << said;
  EXPECT_NE(said.find("ending its children first"), std::string::npos) << said;
  expect_nothing_left_of(master);
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
  auto keys_file = fiber_test::run_folder() / ("stray_keys_" + std::to_string(getpid()));
  std::ofstream(keys_file) << fiber::detail::job_keys::generate().for_worker(false);
  std::vector<std::string> env_text{"FIBER_WORKER_ENDPOINT=" + endpoint, "FIBER_WORKER_KEYS_FILE=" + keys_file.string(),
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
  std::filesystem::remove(keys_file);
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

TEST(process, a_child_at_max_depth_starting_a_process_gets_a_clear_error) {
  // Children may start children (nested) down to max_depth; this child is already there.
  fiber::context ctx(fiber::config::load({{"max_depth", "1"}}));
  fiber::simple_queue<std::string> out(ctx);
  fiber::process p(ctx, &start_from_worker, out);
  p.start().get();
  auto report = out.get().get();
  p.join().get();
  EXPECT_NE(report.find("at depth 1 of its job's tree"), std::string::npos) << report;
  EXPECT_NE(report.find("max_depth=1"), std::string::npos) << report;
  EXPECT_NE(report.find("| not alive"), std::string::npos) << report;
  EXPECT_EQ(p.exitcode(), 0);
}

// A child starts children of its own on every backend (nested): on a cluster backend the top
// master starts them for it, as the engine's is the only way in.
TEST(process, a_child_starts_a_process_of_its_own_on_every_backend) {
  fiber::simple_queue<std::string> out;
  fiber::process p(&start_from_worker, out);  // its child crashes, which is its child's business
  p.start().get();
  auto report = out.get().get();
  p.join().get();
  EXPECT_EQ(p.exitcode(), 0);
  EXPECT_TRUE(report.starts_with("started")) << report;
}

// A master SIGKILLed while its child's child runs: the whole tree ends, and nothing of it is left
// on the engine (the grandchild's container, pod or Slurm job was started by the master too).
TEST(process, the_whole_tree_dies_with_its_master) {
  pid_t master = 0;
  auto pids = start_orphan_master("nested", 2, master);
  ASSERT_EQ(pids.size(), 2u);
  int child = pids[0], grandchild = pids[1];
  kill(master, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(master, &status, 0), master);
  if (fiber_test::on_kubernetes()) {
    // Both pods end (their containers terminate), or are deleted by a master starting meanwhile.
    auto owner = mark_of(master);
    EXPECT_TRUE(fiber_test::await_pods("app.kubernetes.io/managed-by=fiber", [&](const auto& pods) {
      for (auto& [name, pod] : pods) {
        auto* ann = pod.at("metadata").as_object().if_contains("annotations");
        if (!ann || !ann->as_object().contains("fiber.master") || ann->at("fiber.master").as_string() != owner)
          continue;
        auto phase = pod.at("status").at("phase").as_string();
        if (phase != "Succeeded" && phase != "Failed") return false;
      }
      return true;
    })) << "a pod of the tree kept running after its master was killed";
  } else {
    // Local children, containers and the Slurm nodes' processes have pids on this host: both must
    // end (bounded only against a hang).
    for (int pid : {child, grandchild}) {
      int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
      if (fd < 0) continue;  // already gone
      pollfd p{fd, POLLIN, 0};
      EXPECT_EQ(poll(&p, 1, 60000), 1) << "pid " << pid << " of the tree outlived its master";
      close(fd);
    }
  }
  if (fiber_test::on_docker() || fiber_test::on_slurm() || fiber_test::on_kubernetes()) {
    // What is left of them goes when the next master on this machine starts.
    fiber::context ctx;
    fiber::process(ctx, &do_nothing).start().get();
    expect_nothing_left_of(master);
  }
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
