// The `fiber` command on the real two-node Slurm test cluster (scripts/engines.sh): the master as
// a batch job running the program from the shared file system, attach's exit code, ps/logs/stop,
// gc after a killed master, a dry run, and bad input by its message. Label slurm.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json.hpp>

#include "backend/command.hpp"
#include "backend/slurm/slurm_cli.hpp"
#include "cli_support.hpp"
#include "durable_support.hpp"
#include "engine_presence.hpp"
#include "slurm_support.hpp"
#include "support.hpp"

using fiber_test::fiber_cmd;
using fiber_test::command_outcome;

namespace {

std::string unique(const std::string& what) { return "cli-" + what + "-" + fiber_test::run_id(); }

class fiber_command_on_slurm : public ::testing::Test {
 protected:
  void SetUp() override {
    fiber_test::use_test_cluster();
    if (auto why = fiber_test::slurm_absent(); !why.empty()) FIBER_TEST_ENGINE_MISSING("Slurm", why);
  }
  void TearDown() override {
    for (auto& name : started_) fiber_cmd("--backend slurm stop " + name);
  }
  /// Slurm's rows for jobs whose comment says `needle`.
  static std::vector<fiber::detail::slurm::job_row> jobs_with(const std::string& needle) {
    auto r = fiber::detail::run_command({"squeue", "-h", "-r", "--states=all", "-O", fiber::detail::slurm::squeue_fields()});
    std::vector<fiber::detail::slurm::job_row> out;
    for (auto& j : fiber::detail::slurm::parse_squeue(r.out))
      if (j.comment.find(needle) != std::string::npos) out.push_back(j);
    return out;
  }
  static bool all_ended(const std::vector<fiber::detail::slurm::job_row>& rows) {
    for (auto& j : rows)
      if (!fiber::detail::slurm::ended_state(j.state)) return false;
    return true;
  }
  /// A durable run whose master's job `requeue` (a command, given the job's id last) sends back to
  /// Slurm's queue mid-map: the job runs again and takes its run up, nothing run twice.
  static void requeued_mid_map_takes_its_run_up(const std::string& name, std::vector<std::string> requeue);
  std::vector<std::string> started_;
};

}  // namespace

TEST_F(fiber_command_on_slurm, runs_the_pi_example_as_a_batch_job_and_exits_with_its_code) {
  auto name = unique("pi");
  started_.push_back(name);
  auto r = fiber_cmd("run --backend slurm --attach --name " + name + " -- " FIBER_TEST_BUILD_DIR "/examples/pi_estimation");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Pi is roughly 3.1"), std::string::npos) << r.out;
  auto three = fiber_cmd("run --backend slurm --attach --name " + name + "-3 -- " FIBER_TEST_EXIT_WITH " 3 there");
  EXPECT_EQ(three.code, 3) << three.out;
  EXPECT_NE(three.out.find("argument 2: there"), std::string::npos) << three.out;
}

TEST_F(fiber_command_on_slurm, ps_logs_and_stop_follow_a_detached_run) {
  auto name = unique("held");
  started_.push_back(name);
  auto r = fiber_cmd("run --backend slurm --name " + name + " -- " FIBER_TEST_ORPHAN_MASTER);
  ASSERT_EQ(r.code, 0) << r.out;
  // The master prints its child's pid once the child runs.
  auto pid = fiber_test::line_of({"--backend", "slurm", "logs", "-f", name}, fiber_test::a_pid);
  ASSERT_FALSE(pid.empty()) << "the master printed no pid";
  auto ps = fiber_cmd("--backend slurm ps");
  auto row = ps.out.substr(ps.out.find(name));
  row = row.substr(0, row.find('\n'));
  EXPECT_NE(row.find("RUNNING"), std::string::npos) << ps.out;
  EXPECT_TRUE(row.ends_with(" 1")) << "one running worker: " << row;
  EXPECT_NE(fiber_cmd("--backend slurm logs " + name).out.find(pid), std::string::npos);
  auto stopped = fiber_cmd("--backend slurm stop " + name);
  EXPECT_EQ(stopped.code, 0) << stopped.out;
  EXPECT_TRUE(all_ended(jobs_with("fiber run=" + name + " "))) << "the master's job";
  EXPECT_TRUE(all_ended(jobs_with("fiber master=" + name + ":"))) << "its workers' jobs";
  started_.clear();
}

TEST_F(fiber_command_on_slurm, dashboard_serves_a_runs_page_here_relayed_to_its_masters_node) {
  auto name = unique("page");
  started_.push_back(name);
  ASSERT_EQ(fiber_cmd("run --backend slurm --dashboard --name " + name + " -- " FIBER_TEST_ORPHAN_MASTER).code, 0);
  ASSERT_FALSE(fiber_test::line_of({"--backend", "slurm", "logs", "-f", name}, fiber_test::a_pid).empty());
  fiber_test::expect_orphan_masters_page(fiber_test::through_dashboard({"--backend", "slurm", "dashboard", name}), "slurm");
}

TEST_F(fiber_command_on_slurm, gc_cancels_the_workers_a_killed_master_left) {
  auto name = unique("killed");
  started_.push_back(name);
  // Its workers would end by themselves after the heartbeat timeout: a long one makes gc's part
  // seen. Over ZeroMQ: on direct links a worker hears its killed master's TCP end at once.
  ASSERT_EQ(fiber_cmd("run --backend slurm --env FIBER_HEARTBEAT_TIMEOUT_MS=600000 --env FIBER_REMOTE_TRANSPORT=zeromq --name " +
                      name + " -- " FIBER_TEST_ORPHAN_MASTER)
                .code,
            0);
  ASSERT_FALSE(fiber_test::line_of({"--backend", "slurm", "logs", "-f", name}, fiber_test::a_pid).empty());
  auto master = jobs_with("fiber run=" + name + " ");
  ASSERT_EQ(master.size(), 1u);
  auto killed = fiber::detail::run_command({"scancel", "--signal=KILL", master[0].id});
  ASSERT_TRUE(killed.ok()) << killed.problem();
  // Until Slurm has seen the master's job end, gc rightly leaves its workers alone: `logs -f`
  // returns once it has.
  ASSERT_EQ(fiber_cmd("--backend slurm logs -f " + name).code, 0);
  ASSERT_FALSE(all_ended(jobs_with("fiber master=" + name + ":"))) << "the killed master's worker";
  auto gc = fiber_cmd("--backend slurm gc");
  EXPECT_EQ(gc.code, 0) << gc.out;
  EXPECT_NE(gc.out.find("of ended run " + name), std::string::npos) << gc.out;
  EXPECT_TRUE(all_ended(jobs_with("fiber master=" + name + ":"))) << gc.out;
  started_.clear();
}

void fiber_command_on_slurm::requeued_mid_map_takes_its_run_up(const std::string& name, std::vector<std::string> requeue) {
  fiber_test::durable_case c(name);
  ASSERT_EQ(fiber_cmd("run --backend slurm --durable --name " + name + " --env FIBER_JOURNAL_DIR=" + c.journals().string() +
                      " -- " FIBER_TEST_DURABLE_PROGRAM " " + c.executions_file().string() + " " + c.gate().string())
                .code,
            0);
  fiber_test::wait_for_results(c.journals(), 2, 4);
  c.wait_for_both_at_the_gate();
  fiber_test::wait_for_workers_journaled(fiber_test::only_journal(c.journals()), 2);  // the next master finds them
  auto old = c.workers();
  auto before = c.executions();
  auto master = jobs_with("fiber run=" + name + " ");
  ASSERT_EQ(master.size(), 1u);
  requeue.push_back(master[0].id);
  auto requeued = fiber::detail::run_command(requeue);
  ASSERT_TRUE(requeued.ok()) << requeued.problem();
  fiber_test::durable_case::wait_for_end(old);  // the master and its workers
  auto ps = fiber_cmd("--backend slurm ps").out;
  auto row = fiber_test::ps_row(ps, name);
  EXPECT_NE(row.find("restart 1"), std::string::npos) << "ps does not say the master's job was requeued: " << ps;
  // Slurm holds a requeued job back a while (BeginTime); an administrator lets it go.
  auto released = fiber::detail::run_command({"scontrol", "update", "jobid=" + master[0].id, "StartTime=now"});
  ASSERT_TRUE(released.ok()) << released.problem();
  c.open_gate();
  auto logs = fiber_cmd("--backend slurm logs -f " + name);
  EXPECT_EQ(logs.code, 0) << logs.out;
  auto out = logs.out;
  auto last = out.substr(out.rfind('\n', out.size() - 2) + 1);
  EXPECT_EQ(last, fiber_test::uninterrupted) << out;
  EXPECT_NE(out.find("taken up again from its journal"), std::string::npos) << out;
  fiber_test::expect_taken_up(before, c.executions());
}

TEST_F(fiber_command_on_slurm, a_durable_masters_job_requeued_mid_map_runs_again_and_takes_its_run_up) {
  auto name = unique("durable");
  started_.push_back(name);
  requeued_mid_map_takes_its_run_up(name, {"scontrol", "requeue"});
  started_.clear();
}

// Slurm's notice of the master's time limit (the signal fiber run --durable asks for, sent here
// ahead of time): the master has Slurm requeue its job, which a time limit never does by itself.
TEST_F(fiber_command_on_slurm, a_durable_masters_notice_of_its_time_limit_has_its_job_requeued_and_the_run_goes_on) {
  auto name = unique("notice");
  auto plan = fiber_cmd("run --backend slurm --durable --dry-run --name " + name + " -- " FIBER_TEST_EXIT_WITH " 0");
  ASSERT_EQ(plan.code, 0) << plan.out;
  EXPECT_NE(plan.out.find("--signal=B:23@30"), std::string::npos) << "the master's job does not ask for the notice: " << plan.out;
  started_.push_back(name);
  requeued_mid_map_takes_its_run_up(name, {"scancel", "--batch", "--signal=URG"});
  started_.clear();
}

TEST_F(fiber_command_on_slurm, dry_run_prints_the_sbatch_call_and_script_and_submits_nothing) {
  auto name = unique("dry");
  auto r = fiber_cmd("run --backend slurm --dry-run --cpu 2 --memory 1G --env A=b --name " + name + " -- " FIBER_TEST_EXIT_WITH " 7");
  ASSERT_EQ(r.code, 0) << r.out;
  auto plan = boost::json::parse(r.out).as_object();
  auto args = boost::json::serialize(plan.at("sbatch"));
  EXPECT_NE(args.find("--cpus-per-task=2"), std::string::npos) << args;
  EXPECT_NE(args.find("--mem=1024M"), std::string::npos) << args;
  std::string script(plan.at("script").as_string());
  EXPECT_NE(script.find("export FIBER_BACKEND='slurm'"), std::string::npos) << script;
  EXPECT_NE(script.find("export A='b'"), std::string::npos) << script;
  EXPECT_NE(script.find("exec '" FIBER_TEST_EXIT_WITH "' '7'"), std::string::npos) << script;
  EXPECT_TRUE(jobs_with("fiber run=" + name + " ").empty());
}

TEST_F(fiber_command_on_slurm, bad_input_is_an_error_that_names_the_problem_and_the_fix) {
  auto expect_error = [](const command_outcome& r, const std::string& words) {
    EXPECT_EQ(r.code, 125) << r.out;
    EXPECT_NE(r.out.find(words), std::string::npos) << r.out;
  };
  expect_error(fiber_cmd("run --backend slurm --image x -- /bin/true"), "--image has no meaning on slurm");
  expect_error(fiber_cmd("run --backend slurm -- ./no/such/program"), "is not here: build it first");
  expect_error(fiber_cmd("--backend slurm logs no-such-run-here"), "no run named 'no-such-run-here'");
  expect_error(fiber_cmd("--backend slurm stop no-such-run-here"), "`fiber ps` lists yours");
  expect_error(fiber_cmd("--backend slurm cp /etc/hostname data:/x"), "share this file system");
  expect_error(fiber_cmd("run --backend slurm -- /bin/true", "PATH=/nonexistent"), "install Slurm's client commands");
}
