// What the Slurm backend says to Slurm's tools and how it reads their answers, without a cluster;
// and the command runner they go through.
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>
#include <fiber/config.hpp>

#include "backend/backend.hpp"
#include "backend/command.hpp"
#include "backend/slurm/slurm_cli.hpp"

namespace slurm = fiber::detail::slurm;
using fiber::detail::command_result;
using fiber::detail::run_command;

namespace {
bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

fiber::detail::spawn_spec a_spec() {
  fiber::detail::spawn_spec s;
  s.name = "PoolWorker-1-2";
  s.job_id = "j42";
  s.executable = "/shared/bin/my program";
  s.args = {"--fiber-worker"};
  s.env = {{"FIBER_WORKER_TOKEN", "7"}, {"FIBER_WORKER_KEYS", "curve,a'b\"c$d"}};
  s.cpu = 3;
  s.memory_mb = 512;
  s.gpu = 1;
  return s;
}
}  // namespace

TEST(slurm_cli, squeue_rows_are_read_field_by_field) {
  auto rows = slurm::parse_squeue(
      "3|N/A|CANCELLED|None|15|n2|fiber-j-P1|0|fiber master=h:1|\n"
      "1|N/A|FAILED|NonZeroExitCode|768|n1|fiber-j-P2|0||\n"
      "garbage line\n"
      "4|2|PENDING|ReqNodeNotAvail, UnavailableNodes:n1|0||x|0|c|\n"
      "5_1|1|RUNNING|None|0|n1|x|2|c|\n");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[3].id, "5_1");  // as squeue 22.05 prints an element
  EXPECT_EQ(rows[3].restarts, 2);
  EXPECT_EQ(rows[0].restarts, 0);
  EXPECT_EQ(rows[0].id, "3");
  EXPECT_EQ(rows[2].id, "4_2");  // an element of an array
  EXPECT_EQ(rows[0].state, "CANCELLED");
  EXPECT_EQ(slurm::exit_code_of(rows[0].wait_status), -SIGTERM);
  EXPECT_EQ(rows[0].nodes, "n2");
  EXPECT_EQ(slurm::master_of_comment(rows[0].comment), "h:1");
  EXPECT_EQ(slurm::exit_code_of(rows[1].wait_status), 3);
  EXPECT_EQ(rows[1].comment, "");
  EXPECT_TRUE(slurm::hopeless_reason(rows[2].reason));
  EXPECT_FALSE(rows[0].time_left);  // rows without the time fields: none said
}

TEST(slurm_cli, squeue_says_how_long_a_job_has_before_its_time_limit) {
  EXPECT_NE(slurm::squeue_fields().find("TimeLeft"), std::string::npos);
  auto rows = slurm::parse_squeue(
      "5_1|1|RUNNING|None|0|n1|x|0|c|0:42|1:00|\n"
      "6|N/A|RUNNING|None|0|n1|x|0|c|UNLIMITED|UNLIMITED|\n"
      "7|N/A|PENDING|Priority|0||x|0|c|1-02:03:04|1-02:03:04|\n");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].time_left, std::chrono::seconds(42));
  EXPECT_EQ(rows[0].time_limit, std::chrono::seconds(60));
  EXPECT_FALSE(rows[1].time_left);  // no limit
  EXPECT_FALSE(rows[1].time_limit);
  EXPECT_EQ(rows[2].time_left, std::chrono::seconds(86400 + 2 * 3600 + 3 * 60 + 4));
}

TEST(slurm_cli, slurm_times_are_read_in_each_of_slurms_forms) {
  using s = std::chrono::seconds;
  EXPECT_EQ(slurm::parse_slurm_time("5"), s(300));  // minutes
  EXPECT_EQ(slurm::parse_slurm_time("5:07"), s(307));
  EXPECT_EQ(slurm::parse_slurm_time("2:05:07"), s(7507));
  EXPECT_EQ(slurm::parse_slurm_time("1-2"), s(86400 + 7200));  // days-hours
  EXPECT_EQ(slurm::parse_slurm_time("1-2:03"), s(86400 + 7200 + 180));
  EXPECT_EQ(slurm::parse_slurm_time("1-02:03:04"), s(93784));
  for (auto bad : {"", "UNLIMITED", "NOT_SET", "INVALID", "1:2:3:4", "-5", "5:", "1-", "a-1", "5x"})
    EXPECT_FALSE(slurm::parse_slurm_time(bad)) << bad;
}

TEST(slurm_cli, only_final_states_end_a_job) {
  for (auto s : {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"})
    EXPECT_TRUE(slurm::ended_state(s)) << s;
  for (auto s : {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED"}) EXPECT_FALSE(slurm::ended_state(s)) << s;
}

TEST(slurm_cli, sinfo_rooms_count_gpus_from_gres_and_list_each_node_once) {
  auto rooms = slurm::parse_sinfo_rooms(
      "n1|4|2000|(null)\n"
      "g1|64|512000|gpu:a100:4(S:0-1),mps:400\n"
      "g2|32|256000|gpu:2,gpu:t4:1\n"
      "n1|4|2000|(null)\n"  // the same node in a second partition
      "garbage\n");
  ASSERT_EQ(rooms.size(), 3u);
  EXPECT_EQ(rooms[0].name, "n1");
  EXPECT_DOUBLE_EQ(rooms[0].cpus, 4);
  EXPECT_EQ(rooms[0].memory_mb, 2000);
  EXPECT_EQ(rooms[0].gpus, 0);
  EXPECT_EQ(rooms[1].gpus, 4);
  EXPECT_EQ(rooms[1].memory_mb, 512000);
  EXPECT_EQ(rooms[2].gpus, 3);
}

TEST(slurm_cli, reasons_that_cannot_resolve_are_told_from_waiting) {
  for (auto r : {"PartitionConfig", "PartitionDown", "QOSJobLimit", "InvalidAccount", "ReqNodeNotAvail"})
    EXPECT_TRUE(slurm::hopeless_reason(r)) << r;
  for (auto r : {"None", "Priority", "Resources", "BeginTime", "Dependency", "JobHeldUser"})
    EXPECT_FALSE(slurm::hopeless_reason(r)) << r;
}

TEST(slurm_cli, sbatch_answers_are_read) {
  EXPECT_EQ(slurm::parse_sbatch_id("123\n"), "123");
  EXPECT_EQ(slurm::parse_sbatch_id("123;cluster2\n"), "123");
  EXPECT_FALSE(slurm::parse_sbatch_id("Submitted batch job 5"));
  EXPECT_FALSE(slurm::parse_sbatch_id(""));
  EXPECT_TRUE(slurm::transient_error("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"));
  EXPECT_FALSE(slurm::transient_error("sbatch: error: Invalid generic resource (gres) specification"));
}

TEST(slurm_cli, names_comments_and_extra_arguments) {
  EXPECT_EQ(slurm::job_name("j1", "Pool Worker/1"), "fiber-j1-Pool_Worker_1");
  EXPECT_EQ(slurm::master_of_comment(slurm::master_comment("host:12")), "host:12");
  EXPECT_EQ(slurm::master_of_comment("someone else's job"), "");
  EXPECT_EQ(slurm::master_of_comment(slurm::master_comment("host:12", true)), "host:12");
  EXPECT_TRUE(slurm::durable_comment(slurm::master_comment("host:12", true)));
  EXPECT_FALSE(slurm::durable_comment(slurm::master_comment("host:12")));
  EXPECT_FALSE(slurm::durable_comment("my own durable"));
  EXPECT_EQ(slurm::split_args("  --exclusive\t--reservation=r1 "), (std::vector<std::string>{"--exclusive", "--reservation=r1"}));
}

TEST(slurm_cli, a_childs_needs_and_the_config_become_sbatch_options) {
  auto cfg = fiber::config::load({{"slurm_partition", "gpu"}, {"slurm_account", "acct"}, {"slurm_qos", "high"},
                                  {"slurm_time_limit", "1-00:00:00"}, {"slurm_constraint", "v100"},
                                  {"slurm_sbatch_args", "--exclusive --reservation=r1"}});
  auto a = slurm::sbatch_args(a_spec(), cfg, "host:9", "/shared/out", "/work", "fiber-j42-PoolWorker-1-2");
  EXPECT_EQ(a[0], "sbatch");
  for (auto x : {"--parsable", "--job-name=fiber-j42-PoolWorker-1-2", "--comment=fiber master=host:9",
                 "--cpus-per-task=3", "--mem=512M", "--gres=gpu:1", "--partition=gpu", "--account=acct", "--qos=high",
                 "--time=1-00:00:00", "--constraint=v100", "--exclusive", "--reservation=r1", "--no-requeue",
                 "--output=/shared/out/fiber-j42-PoolWorker-1-2.out", "--chdir=/work"})
    EXPECT_TRUE(has(a, x)) << x;
}

// Slurm tells each job (the batch shell, which is the worker: the script execs it) of its time
// limit drain_notice_ms ahead, with SIGURG (a child that does not listen ignores it); each step too.
TEST(slurm_cli, jobs_and_steps_ask_for_the_notice_of_their_time_limit) {
  auto cfg = fiber::config::load({{"drain_notice_ms", "45500"}});
  EXPECT_TRUE(has(slurm::sbatch_args(a_spec(), cfg, "host:9", "/out", "", "n"), "--signal=B:23@46"));
  EXPECT_TRUE(has(slurm::srun_args(a_spec(), cfg, "n2"), "--signal=23@46"));
  EXPECT_TRUE(has(slurm::sbatch_args(a_spec(), fiber::config::load({{"drain_notice_ms", "1"}}), "host:9", "/out", "", "n"),
                  "--signal=B:23@1"))
      << "Slurm's notice is at least a second";
  // drain_notice_ms = 0: no notice asked for; the time limit ends the worker as a kill would.
  auto none = fiber::config::load({{"drain_notice_ms", "0"}});
  for (auto& x : slurm::sbatch_args(a_spec(), none, "host:9", "/out", "", "n")) EXPECT_EQ(x.find("--signal"), std::string::npos) << x;
  for (auto& x : slurm::srun_args(a_spec(), none, "n2")) EXPECT_EQ(x.find("--signal"), std::string::npos) << x;
}

TEST(slurm_cli, children_asking_the_same_make_one_array_with_an_output_file_each) {
  auto cfg = fiber::config::load({});
  auto a = a_spec(), b = a_spec(), c = a_spec();
  b.name = "PoolWorker-1-3";
  b.env[0].second = "8";
  c.cpu = 1;
  EXPECT_EQ(slurm::submission_key(a, cfg), slurm::submission_key(b, cfg));
  EXPECT_NE(slurm::submission_key(a, cfg), slurm::submission_key(c, cfg));
  auto name = slurm::array_job_name(a.job_id, a.name, 2);
  auto args = slurm::sbatch_args(a, cfg, "host:9", "/out", "", name, 2);
  EXPECT_TRUE(has(args, "--array=0-1"));
  EXPECT_TRUE(has(args, "--output=/out/" + name + "_%a.out"));
  EXPECT_TRUE(has(args, "--job-name=" + name));
}

TEST(slurm_cli, each_element_of_an_array_gets_its_own_environment) {
  auto a = a_spec(), b = a_spec();
  b.env[0].second = "8";
  for (auto* s : {&a, &b}) {
    s->executable = "/bin/sh";
    s->args = {"-c", "printf %s \"$FIBER_WORKER_TOKEN\""};
  }
  auto script = slurm::batch_script(std::vector<const fiber::detail::spawn_spec*>{&a, &b});
  EXPECT_EQ(run_command({"env", "SLURM_ARRAY_TASK_ID=0", "sh"}, script).out, "7");
  EXPECT_EQ(run_command({"env", "SLURM_ARRAY_TASK_ID=1", "sh"}, script).out, "8");
  auto stray = run_command({"env", "SLURM_ARRAY_TASK_ID=2", "sh"}, script);
  EXPECT_EQ(stray.code, 2);
  EXPECT_NE(stray.err.find("not in this job array"), std::string::npos);
}

TEST(slurm_cli, a_step_takes_the_childs_needs_but_not_the_jobs_placement) {
  auto cfg = fiber::config::load({{"slurm_partition", "gpu"}, {"slurm_srun_args", "--cpu-bind=cores"}});
  auto a = slurm::srun_args(a_spec(), cfg, "n2");
  for (auto x : {"--overlap", "--exact", "--nodelist=n2", "--cpus-per-task=3", "--gres=gpu:1", "--input=none",
                 "--cpu-bind=cores"})
    EXPECT_TRUE(has(a, x)) << x;
  EXPECT_FALSE(has(a, "--partition=gpu"));
  EXPECT_EQ(a[a.size() - 2], "/shared/bin/my program");
  EXPECT_EQ(a.back(), "--fiber-worker");
}

TEST(slurm_cli, a_host_hub_that_forks_its_nodes_children_holds_its_node_whole) {
  auto cfg = fiber::config::load({});
  auto hub = a_spec();
  hub.host = "n1";
  hub.whole_host = true;
  auto batch = slurm::sbatch_args(hub, cfg, "host:9", "/out", "", "fiber-j42-hub-n1");
  EXPECT_TRUE(has(batch, "--exclusive"));
  EXPECT_TRUE(has(batch, "--nodelist=n1"));
  EXPECT_FALSE(has(batch, "--cpus-per-task=3"));
  auto step = slurm::srun_args(hub, cfg, "n1");
  EXPECT_TRUE(has(step, "--whole"));
  EXPECT_FALSE(has(step, "--exact"));
  EXPECT_FALSE(has(step, "--cpus-per-task=3"));
  auto shared = hub;
  shared.whole_host = false;  // a hub beside engine-started children: never one array with it
  EXPECT_NE(slurm::submission_key(hub, cfg), slurm::submission_key(shared, cfg));
}

TEST(slurm_cli, the_batch_script_sets_the_environment_exactly_and_execs_the_program) {
  auto spec = a_spec();
  spec.executable = "/bin/sh";
  spec.args = {"-c", "printf '%s|%s' \"$FIBER_WORKER_TOKEN\" \"$FIBER_WORKER_KEYS\""};
  auto r = run_command({"sh"}, slurm::batch_script(spec));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "7|curve,a'b\"c$d");
}

TEST(slurm_cli, the_batch_script_names_a_missing_program_and_the_fix) {
  auto spec = a_spec();
  auto r = run_command({"sh"}, slurm::batch_script(spec));
  EXPECT_EQ(r.code, 127);
  EXPECT_NE(r.err.find("/shared/bin/my program"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("shared file system"), std::string::npos) << r.err;
}

TEST(command, output_input_and_exit_code_come_back) {
  auto r = run_command({"sh", "-c", "cat; echo err >&2; exit 4"}, "from stdin");
  EXPECT_EQ(r.code, 4);
  EXPECT_EQ(r.out, "from stdin");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.problem(), "err");
}

TEST(command, a_program_that_ignores_its_input_does_not_hurt_the_caller) {
  auto r = run_command({"true"}, std::string(1 << 20, 'x'));  // the pipe breaks: no SIGPIPE here
  EXPECT_EQ(r.code, 0);
}

TEST(command, a_missing_program_is_named) {
  auto r = run_command({"no-such-program-fiber"});
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.problem().find("no-such-program-fiber"), std::string::npos);
  EXPECT_NE(r.problem().find("PATH"), std::string::npos);
}

TEST(command, a_program_past_its_time_is_killed_and_said_so) {
  auto r = run_command({"sleep", "30"}, {}, std::chrono::milliseconds(100));
  EXPECT_EQ(r.code, -SIGKILL);
  EXPECT_NE(r.failure.find("did not answer"), std::string::npos);
}

TEST(command, the_command_thread_answers_on_the_io_context_in_order) {
  asio::io_context io;
  auto busy = asio::make_work_guard(io);  // run_one waits for the answers instead of returning
  std::vector<std::string> answers;
  {
    fiber::detail::command_thread t(io);
    t.run({"echo", "one"}, {}, [&](command_result r) { answers.push_back(r.out); });
    t.run({"echo", "two"}, {}, [&](command_result r) { answers.push_back(r.out); });
    while (answers.size() < 2) io.run_one();
  }
  EXPECT_EQ(answers, (std::vector<std::string>{"one\n", "two\n"}));
}

TEST(slurm_cli, slurmstepds_memory_kill_reads_as_a_memory_stop_with_the_use_and_the_limit) {
  auto stop = slurm::memory_stop_in(
      "some output\nslurmstepd-n1: error: StepId=3.batch exceeded memory limit (329760768 > 67108864), being killed\n"
      "slurmstepd-n1: error: Exceeded job memory limit\n");
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->limit_mb, 64u);
  EXPECT_EQ(stop->peak_mb, 315u);
  EXPECT_FALSE(slurm::memory_stop_in("slurmstepd: error: *** JOB 3 CANCELLED ***\n"));
  EXPECT_FALSE(slurm::memory_stop_in("exceeded memory limit (garbage)")) << "a line it cannot read is no stop";
}
