// What only the Slurm backend does, on the test cluster (two nodes, n1 and n2): placement on both
// nodes, a worker's job cancelled from outside, requests Slurm cannot satisfy, configuration that
// cannot work. Runs with the master outside an allocation (children are batch jobs) and, as
// slurm-steps:slurm_backend, inside one (children are steps).
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <arpa/inet.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <span>
#include <stdexcept>
#include <filesystem>
#include <fstream>
#include <map>
#include <future>
#include <numeric>
#include <set>
#include <thread>

#include <asio/io_context.hpp>

#include "backend/backend.hpp"
#include "backend/command.hpp"
#include "slurm_support.hpp"
#include "support.hpp"

namespace {

/// The master runs inside an allocation: children are job steps.
bool in_allocation() {
  const char* job = std::getenv("SLURM_JOB_ID");
  return job && *job;
}

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// Reports the node it runs on and waits for a release: two at once are on two workers.
int meet_on_a_node(int x, fiber::simple_queue<std::string> arrived, fiber::simple_queue<int> release) {
  arrived.put(host_name()).get();
  return release.get().get() + x * 0;
}

// The first call (marker created atomically) cancels the Slurm work it runs in, as an operator's
// scancel would, and waits to be killed; every other call returns x.
int cancel_my_job_once(int x, std::string marker) {
  int fd = ::open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd >= 0) {
    ::close(fd);
    // An element of a job array is named array_element (scancel ignores its own job id).
    std::string job = std::getenv("SLURM_JOB_ID");
    if (const char* array = std::getenv("SLURM_ARRAY_JOB_ID"))
      job = std::string(array) + "_" + std::getenv("SLURM_ARRAY_TASK_ID");
    if (const char* step = std::getenv("SLURM_STEP_ID")) job += std::string(".") + step;
    std::string cmd = "scancel " + job;
    // Cancelling a step ends everything in it, scancel included, which may then exit with an
    // error although it did its work (the step's SIGTERM reached it before its own exit). So its
    // status decides nothing: this worker waits for its own end, and answers -1 (the map's result
    // then says it) only when none has come long after.
    (void)std::system(cmd.c_str());
    for (int i = 0; i < 600; ++i) ::usleep(100'000);
    return -1;
  }
  return x;
}

// The host hub this worker links to (remote_transport=hub), and its node.
std::string hub_and_node(int) {
  const char* hub = std::getenv("FIBER_WORKER_HUB");
  return std::string(hub ? hub : "(none)") + " on " + host_name();
}

// The first call (marker created atomically) cancels the hub of this worker's node, as an
// operator's scancel would, and waits: its link to the master went with the hub. Every other call
// returns x.
int cancel_my_hub_once(int x, std::string marker) {
  int fd = ::open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd >= 0) {
    ::close(fd);
    std::string name = "fiber-" + std::string(std::getenv("FIBER_WORKER_JOB")) + "-hub-" + host_name();
    int status = std::system(("scancel --name=" + name).c_str());
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    for (;;) ::pause();
  }
  return x;
}

// hub_workers=fork: what started this worker (its parent's first two arguments), and its node.
std::string parent_and_node(int) {
  std::ifstream in("/proc/" + std::to_string(::getppid()) + "/cmdline");
  std::string exe, flag;
  std::getline(in, exe, '\0');
  std::getline(in, flag, '\0');
  return flag + " on " + host_name();
}

int needs_many_cpus() { return 0; }
int runs_anywhere() { return 0; }
int doubled(int x) { return 2 * x; }
int needs_a_gpu() { return 0; }

}  // namespace

// A pattern no other traffic carries, 32 bytes: any 64 bytes of it in the clear hold it whole.
constexpr char probe_pattern[] = "fiber ring plaintext probe 0123";

// Two members, one per node: rank 0 broadcasts 4 MiB of the pattern, and both check it arrived.
void broadcast_the_probe(fiber::ring_member& me) {
  std::vector<char> data(std::size_t{4} << 20, '\0');
  if (me.rank() == 0)
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = probe_pattern[i % 32];
  me.set("node/" + std::to_string(me.rank()), host_name()).get();
  me.broadcast(std::span<char>(data), 0);
  for (std::size_t i = 0; i < data.size(); i += 4099)
    if (data[i] != probe_pattern[i % 32]) throw std::runtime_error("the broadcast did not arrive whole");
  if (me.rank() == 0 && me.get("node/0").get() == me.get("node/1").get())
    throw std::runtime_error("both members ran on node " + host_name());
}

/// Every frame on every interface of this network namespace while it lives (AF_PACKET), and the
/// TCP payload bytes it saw between the Slurm nodes' addresses (10.77.0.0/24).
class capture {
 public:
  capture() : fd_(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL))) {
    if (fd_ < 0) return;
    timeval tv{0, 100'000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    // Room for a burst (frames the kernel cannot queue are dropped, unseen), and for a frame of
    // 64 KiB of TCP (segmentation offload hands the veths such frames).
    int room = 256 << 20;
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &room, sizeof room);
    thread_ = std::thread([this] {
      std::vector<unsigned char> frame(1 << 18);
      while (!stop_) {
        auto n = ::recv(fd_, frame.data(), frame.size(), 0);
        if (n <= 14 + 20) continue;
        take(frame.data(), static_cast<std::size_t>(n));
      }
    });
  }
  ~capture() { finish(); }
  bool works() const { return fd_ >= 0; }
  void finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  std::size_t between_nodes = 0;  // TCP payload bytes
  std::string payloads;           // their bytes (at most 64 MiB)

 private:
  void take(const unsigned char* f, std::size_t n) {
    if (f[12] != 0x08 || f[13] != 0x00) return;  // IPv4 only
    const unsigned char* ip = f + 14;
    std::size_t ihl = (ip[0] & 15u) * 4u;
    if (ip[9] != 6 || n < 14 + ihl + 20) return;  // TCP
    bool nodes = ip[12] == 10 && ip[13] == 77 && ip[14] == 0 && ip[16] == 10 && ip[17] == 77 && ip[18] == 0;
    if (!nodes) return;
    const unsigned char* tcp = ip + ihl;
    std::size_t offset = (tcp[12] >> 4) * 4u;
    std::size_t total = (std::size_t{ip[2]} << 8) | ip[3];
    if (14 + total > n || ihl + offset > total) return;
    std::size_t len = total - ihl - offset;
    between_nodes += len;
    if (payloads.size() < (std::size_t{64} << 20)) payloads.append(reinterpret_cast<const char*>(tcp + offset), len);
  }
  int fd_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

FIBER_REMOTE(meet_on_a_node);
FIBER_REMOTE(broadcast_the_probe);
FIBER_REMOTE(cancel_my_job_once);
FIBER_REMOTE(hub_and_node);
FIBER_REMOTE(cancel_my_hub_once);
FIBER_REMOTE(parent_and_node);
FIBER_REMOTE(needs_many_cpus);
FIBER_META(needs_many_cpus, .cpu = 64);
FIBER_REMOTE(runs_anywhere);
FIBER_REMOTE(doubled);
FIBER_REMOTE(needs_a_gpu);
FIBER_META(needs_a_gpu, .gpu = 1);

class slurm_backend : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fiber_test::on_slurm()) FIBER_TEST_BACKEND_GATED("runs with FIBERTEST_BACKEND=slurm (ctest label slurm)");
  }
};

TEST_F(slurm_backend, a_pool_of_two_runs_its_tasks_on_both_nodes) {
  // Outside an allocation Slurm packs small jobs onto one node: --exclusive gives each its own.
  // Inside one, fiber places each step on the node with the fewest of its CPUs in use.
  fiber::context ctx(fiber::config::load({{"slurm_sbatch_args", "--exclusive"}}));
  fiber::pool p(ctx, 2);
  p.ready().get();  // both workers connected: neither takes both tasks
  fiber::simple_queue<std::string> arrived(ctx);
  fiber::simple_queue<int> release(ctx);
  std::vector<std::tuple<int, fiber::simple_queue<std::string>, fiber::simple_queue<int>>> args;
  for (int i = 0; i < 2; ++i) args.emplace_back(i, arrived, release);
  auto all = p.starmap_async(&meet_on_a_node, args, 1);
  std::set<std::string> nodes;
  for (int i = 0; i < 2; ++i) nodes.insert(arrived.get().get());
  EXPECT_EQ(nodes, (std::set<std::string>{"n1", "n2"}));
  for (int i = 0; i < 2; ++i) release.put(i).get();
  auto r = std::move(all).get();
  std::sort(r.begin(), r.end());
  EXPECT_EQ(r, (std::vector<int>{0, 1}));
}

// A pass of Slurm's scheduler reaches a few jobs (default_queue_depth; here set as two on fiber's
// side): a pool of three is submitted as an array of two, then, once a pass has looked at it, a
// job of its own, and all three workers start.
TEST_F(slurm_backend, a_pool_larger_than_a_scheduling_pass_is_submitted_as_arrays_one_pass_each) {
  if (in_allocation()) FIBER_TEST_BACKEND_GATED("steps are no batch jobs: no scheduling pass starts them");
  fiber::context ctx(fiber::config::load({{"slurm_jobs_per_pass", "2"}}));
  fiber::pool p(ctx, 3);
  p.ready().get();
  std::map<long, std::set<std::string>> workers_of;  // the elements of each submission, by its job id
  for (auto& j : fiber_test::live_slurm_jobs_of(fiber::detail::master_mark())) {
    auto bar = j.id.find('_');
    workers_of[std::stol(j.id.substr(0, bar))].insert(bar == std::string::npos ? "" : j.id.substr(bar + 1));
  }
  std::vector<std::set<std::string>> submissions;
  for (auto& [id, elements] : workers_of) submissions.push_back(elements);
  EXPECT_EQ(submissions, (std::vector<std::set<std::string>>{{"0", "1"}, {""}})) << "in the order submitted";
  auto r = p.map(&doubled, std::vector<int>{1, 2, 3}, 1).get();
  EXPECT_EQ(r, (std::vector<int>{2, 4, 6}));
}

// Anyone on the network path between the nodes sees a ring's bytes: they are TLS records, never
// the tensor. Captured on every interface of this namespace (the host's veths to both nodes; in
// an allocation, the node's own).
TEST_F(slurm_backend, a_ring_across_the_nodes_shows_no_plaintext_on_the_wire) {
  capture seen;
  ASSERT_TRUE(seen.works()) << "an AF_PACKET socket needs CAP_NET_RAW: " << std::strerror(errno);
  fiber::context ctx(fiber::config::load({{"slurm_sbatch_args", "--exclusive"}}));
  fiber::ring r(ctx, 2, &broadcast_the_probe);
  r.start().get();
  r.join().get();
  seen.finish();
  for (auto code : r.exitcodes()) EXPECT_EQ(code, 0);
  EXPECT_GE(seen.between_nodes, std::size_t{4} << 20) << "the capture did not see the broadcast cross between the nodes";
  EXPECT_EQ(seen.payloads.find(std::string(probe_pattern, 32)), std::string::npos)
      << "the broadcast crossed between the nodes in the clear";
}

TEST_F(slurm_backend, with_host_hubs_one_runs_on_each_node_and_the_workers_link_to_theirs) {
  // Batch jobs: three of a node's four CPUs each, so one worker on each node, beside its hub (one
  // CPU). Steps: fiber places each on the node with the fewest of its CPUs in use.
  fiber::context ctx(fiber::config::load({{"remote_transport", "hub"}, {"cpu_per_job", in_allocation() ? "1" : "3"}}));
  fiber::pool p(ctx, 2);
  p.ready().get();  // both workers linked: each takes tasks
  auto seen = p.map(&hub_and_node, std::vector<int>(8), 1).get();
  std::set<std::string> where(seen.begin(), seen.end());
  ASSERT_EQ(where.size(), 2u) << seen.front();
  std::string hub = seen.front().substr(0, seen.front().find(' '));
  EXPECT_TRUE(hub.starts_with("fiber-hub-")) << seen.front();
  EXPECT_EQ(where, (std::set<std::string>{hub + " on n1", hub + " on n2"}));
  // One hub on each node, as Slurm jobs of this master (in an allocation, steps); none is left
  // once it ends (test_main).
  if (in_allocation()) return;
  std::set<std::string> hub_nodes;
  for (auto& j : fiber_test::live_slurm_jobs_of(fiber::detail::master_mark()))
    if (j.name.find("hub-") != std::string::npos) hub_nodes.insert(j.nodes);
  EXPECT_EQ(hub_nodes, (std::set<std::string>{"n1", "n2"}));
}

TEST_F(slurm_backend, with_hub_workers_fork_each_nodes_hub_forks_the_workers_placed_there) {
  // Each hub holds its node (four CPUs) and forks three workers there; Slurm runs only the hubs.
  fiber::context ctx(fiber::config::load({{"remote_transport", "hub"}, {"hub_workers", "fork"}}));
  fiber::pool p(ctx, 6);
  p.ready().get();
  auto seen = p.map(&parent_and_node, std::vector<int>(60), 1).get();
  std::set<std::string> where(seen.begin(), seen.end());
  EXPECT_EQ(where, (std::set<std::string>{"--fiber-hub on n1", "--fiber-hub on n2"})) << seen.front();
  if (in_allocation()) return;
  std::multiset<std::string> jobs;
  for (auto& j : fiber_test::live_slurm_jobs_of(fiber::detail::master_mark()))
    jobs.insert(j.name.find("-hub-") != std::string::npos ? "hub on " + j.nodes : j.name);
  EXPECT_EQ(jobs, (std::multiset<std::string>{"hub on n1", "hub on n2"}));
}

TEST_F(slurm_backend, with_hub_workers_fork_a_child_waits_for_a_free_cpu_and_one_asking_for_a_gpu_is_refused) {
  fiber::context ctx(fiber::config::load({{"remote_transport", "hub"}, {"hub_workers", "fork"}}));
  fiber::simple_queue<std::string> arrived(ctx);
  fiber::simple_queue<int> release(ctx);
  // Six fill both nodes' hubs (three CPUs each for children); the seventh waits until one ends.
  std::vector<fiber::process> held;
  for (int i = 0; i < 7; ++i) held.emplace_back(ctx, &meet_on_a_node, i, arrived, release);
  std::vector<std::future<void>> started;
  for (auto& p : held) started.push_back(std::async(std::launch::async, [&p] { p.start().get(); }));
  std::multiset<std::string> nodes;
  for (int i = 0; i < 6; ++i) nodes.insert(arrived.get().get());
  EXPECT_EQ(nodes.count("n1"), 3u);
  EXPECT_EQ(nodes.count("n2"), 3u);
  // A hub says a child's pid as it forks it, before the child can say anything: the six that
  // arrived have theirs; the one not forked has none.
  EXPECT_EQ(std::count_if(held.begin(), held.end(), [](auto& p) { return p.pid() == 0; }), 1);
  release.put(0).get();  // one ends; the seventh is placed where it ended
  nodes.insert(arrived.get().get());
  EXPECT_EQ(nodes.size(), 7u);
  for (int i = 0; i < 6; ++i) release.put(0).get();
  for (auto& f : started) f.get();
  for (auto& p : held) p.join().get();
  for (auto& p : held) EXPECT_EQ(p.exitcode(), 0);
  fiber::process gpu(ctx, &needs_a_gpu);
  fiber_test::expect_error([&] { gpu.start().get(); }, fiber::errc::unsatisfiable,
                           {"hub_workers=fork", "set hub_workers=engine"});
}

TEST_F(slurm_backend, a_host_hub_cancelled_mid_map_is_started_again_and_every_task_is_done) {
  if (in_allocation()) FIBER_TEST_BACKEND_GATED("the hubs are steps of the allocation here");
  auto marker = fiber_test::run_folder() / ("fiber-hub-scancel-" + std::to_string(::getpid()));
  std::filesystem::remove(marker);
  fiber::context ctx(fiber::config::load(
      {{"remote_transport", "hub"}, {"heartbeat_interval_ms", "100"}, {"heartbeat_timeout_ms", "1000"}}));
  fiber::pool p(ctx, 2);
  std::vector<std::tuple<int, std::string>> args;
  for (int i = 0; i < 40; ++i) args.emplace_back(i, marker.string());
  auto r = p.starmap(&cancel_my_hub_once, args, 1).get();
  std::vector<int> expected(40);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(r, expected);
  EXPECT_TRUE(std::filesystem::exists(marker));  // a hub was cancelled
  EXPECT_GE(p.stats().workers_lost, 1u);         // and its node's workers with it
  // ... and started again: a hub runs on each node once Slurm has started the new one (the
  // map may have ended on the other node's worker before that; the deadline is against a hang).
  std::set<std::string> hub_nodes;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       hub_nodes.size() < 2 && std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(std::chrono::milliseconds(100))) {
    hub_nodes.clear();
    for (auto& j : fiber_test::live_slurm_jobs_of(fiber::detail::master_mark()))
      if (j.name.find("-hub-") != std::string::npos && j.state == "RUNNING") hub_nodes.insert(j.nodes);
  }
  EXPECT_EQ(hub_nodes, (std::set<std::string>{"n1", "n2"}));
  std::filesystem::remove(marker);
}

TEST_F(slurm_backend, a_workers_job_cancelled_mid_map_has_its_tasks_run_again) {
  auto marker = fiber_test::run_folder() / ("fiber-scancel-" + std::to_string(::getpid()));
  std::filesystem::remove(marker);
  fiber::pool p(2);
  std::vector<std::tuple<int, std::string>> args;
  for (int i = 0; i < 40; ++i) args.emplace_back(i, marker.string());
  auto r = p.starmap(&cancel_my_job_once, args, 1).get();
  std::vector<int> expected(40);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(r, expected);
  EXPECT_TRUE(std::filesystem::exists(marker));  // one job was cancelled
  auto s = p.stats();
  EXPECT_EQ(s.workers_lost, 1u);
  EXPECT_GE(s.retried, 1u);
  std::filesystem::remove(marker);
}

// A durable run's master takes up the Slurm jobs its journal names; one that is not a durable
// run's worker (a journal naming another of the user's jobs) is refused, and neither watched nor
// cancelled at the master's end.
TEST_F(slurm_backend, a_job_that_is_not_a_durable_worker_is_not_taken_up) {
  auto submitted = fiber::detail::run_command(
      {"sbatch", "--parsable", "--begin=now+1hour", "--output=/dev/null", "--wrap", "sleep 600"});
  ASSERT_TRUE(submitted.ok()) << submitted.problem();
  auto id = submitted.out.substr(0, submitted.out.find_first_of(";\n"));
  {
    asio::io_context io;
    auto backend = fiber::detail::make_backend(io, fiber::config::load(), "not-mine");
    // In an allocation, workers are steps, which end with it: nothing is taken up.
    if (in_allocation())
      fiber_test::expect_error([&] { (void)backend->adopt(id); }, fiber::errc::unsatisfiable,
                               {"in an allocation workers are its job steps", "outside an allocation"});
    else
      fiber_test::expect_error([&] { (void)backend->adopt(id); }, fiber::errc::spawn_failed,
                               "is not a durable run's worker");
  }
  auto listed = fiber::detail::run_command({"squeue", "-h", "-j", id, "-o", "%i"});
  EXPECT_NE(listed.out.find(id), std::string::npos) << "the job was cancelled";
  (void)fiber::detail::run_command({"scancel", id});
}

// Requests no node has fail at start, before anything is submitted, naming what the nodes have
// (sinfo); in an allocation, its nodes.
TEST_F(slurm_backend, more_cpus_than_any_node_has_fail_start_naming_the_nodes) {
  fiber::process p(&needs_many_cpus);
  fiber_test::expect_error([&] { p.start().get(); }, fiber::errc::unsatisfiable,
                           {"asks for cpu 64", "has cpu 4, memory 2000 MiB, 0 gres gpu", "(sinfo)"});
}

// What the check cannot see (here: raw sbatch arguments) Slurm still refuses: a job that pends
// for a reason that will not resolve itself fails its start in Slurm's words.
TEST_F(slurm_backend, a_job_slurm_will_never_run_fails_start_with_slurms_reason) {
  if (in_allocation()) FIBER_TEST_BACKEND_GATED("steps do not queue");
  fiber::context ctx(fiber::config::load({{"slurm_sbatch_args", "--cpus-per-task=64"}}));
  fiber::process p(ctx, &runs_anywhere);
  fiber_test::expect_error([&] { p.start().get(); }, fiber::errc::spawn_failed,
                           {"pends with reason", "will not resolve itself"});
}

TEST_F(slurm_backend, a_gpu_where_no_node_has_one_fails_start_naming_the_nodes) {
  fiber::process p(&needs_a_gpu);
  fiber_test::expect_error([&] { p.start().get(); }, fiber::errc::unsatisfiable,
                           {"1 gres gpu", "0 gres gpu", "slurm_partition"});
}

TEST_F(slurm_backend, a_job_pending_past_slurm_pending_timeout_fails_start_with_its_reason) {
  if (in_allocation()) FIBER_TEST_BACKEND_GATED("steps do not queue");
  // --begin keeps the job pending (reason BeginTime, which resolves itself: only the limit ends it).
  fiber::context ctx(fiber::config::load({{"slurm_sbatch_args", "--begin=now+1hour"}, {"slurm_pending_timeout_ms", "1"}}));
  fiber::process p(ctx, &runs_anywhere);
  fiber_test::expect_error([&] { p.start().get(); }, fiber::errc::spawn_failed,
                           {"slurm_pending_timeout_ms", "BeginTime"});
}

TEST_F(slurm_backend, an_unknown_partition_is_a_config_error_naming_it) {
  if (in_allocation()) FIBER_TEST_BACKEND_GATED("steps run in the allocation's partition");
  fiber::context ctx(fiber::config::load({{"slurm_partition", "no-such-partition"}}));
  fiber::process p(ctx, &needs_a_gpu);
  fiber_test::expect_error([&] { p.start().get(); }, fiber::errc::config_error,
                           {"no-such-partition", "slurm_partition"});
}

TEST_F(slurm_backend, steps_mode_outside_an_allocation_is_a_config_error) {
  if (in_allocation()) FIBER_TEST_BACKEND_GATED("this run is inside an allocation");
  fiber_test::expect_error([&] { fiber::context ctx(fiber::config::load({{"slurm_mode", "steps"}})); fiber::process(ctx, &needs_a_gpu).start().get(); },
                           fiber::errc::config_error, {"slurm_mode=steps", "sbatch or salloc"});
}

TEST_F(slurm_backend, slurm_options_with_spaces_are_refused_naming_the_key) {
  fiber_test::expect_error([] { fiber::config::load({{"slurm_partition", "a b"}}); }, fiber::errc::config_error,
                           {"slurm_partition"});
  fiber_test::expect_error([] { fiber::config::load({{"slurm_time_limit", "1 hour"}}); }, fiber::errc::config_error,
                           {"slurm_time_limit"});
}

// The controller may take a job and still fail to answer sbatch (a timeout under load): the job
// must then be found by its name, not submitted twice. An sbatch on PATH that submits for real and
// then reports a timeout, once, plays that controller.
TEST_F(slurm_backend, a_job_taken_without_an_answer_is_found_not_submitted_twice) {
  if (in_allocation()) FIBER_TEST_BACKEND_GATED("steps are not submitted with sbatch");
  auto dir = fiber_test::run_folder() / ("fiber-sbatch-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto real = fiber::detail::run_command({"sh", "-c", "command -v sbatch"}).out;
  while (!real.empty() && real.back() == '\n') real.pop_back();
  ASSERT_FALSE(real.empty());
  {
    std::ofstream w(dir / "sbatch");
    w << "#!/bin/sh\n"
      << "if mkdir " << (dir / "failed-once").string() << " 2>/dev/null; then\n"
      << "  " << real << " \"$@\" >/dev/null || exit 1\n"
      << "  echo 'sbatch: error: Batch job submission failed: Socket timed out on send/recv operation' >&2\n"
      << "  exit 1\n"
      << "fi\n"
      << "echo submitted >>" << (dir / "submissions").string() << "\n"
      << "exec " << real << " \"$@\"\n";
  }
  std::filesystem::permissions(dir / "sbatch", std::filesystem::perms::owner_all);
  std::string path = std::getenv("PATH");
  ::setenv("PATH", (dir.string() + ":" + path).c_str(), 1);
  {
    fiber::context ctx;
    fiber::process p(ctx, &runs_anywhere);
    p.start().get();
    p.join().get();
    EXPECT_EQ(p.exitcode(), 0);
  }
  ::setenv("PATH", path.c_str(), 1);
  EXPECT_TRUE(std::filesystem::exists(dir / "failed-once"));
  EXPECT_FALSE(std::filesystem::exists(dir / "submissions"));  // found by its name: never submitted again
  std::filesystem::remove_all(dir);
}
