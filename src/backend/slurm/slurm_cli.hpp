// What the Slurm backend says to Slurm's command-line tools and how it reads their answers: pure
// functions, tested without a cluster (tests/slurm_cli_test.cpp).
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/engine_run.hpp"
#include "backend/node_room.hpp"

namespace fiber {
struct config;
}


namespace fiber::detail::slurm {

/// The `-o` format of `sinfo -h -N` that parse_sinfo_rooms reads: node, CPUs, memory (MB), gres.
inline constexpr std::string_view sinfo_room_format = "%N|%c|%m|%G";
/// Each node once (sinfo -N lists a node once per partition), with its GPUs counted from its
/// gres ("gpu:2", "gpu:a100:4(S:0-1)", "(null)").
std::vector<node_room> parse_sinfo_rooms(std::string_view out);

/// One row of `squeue -O <squeue_fields>`.
struct job_row {
  std::string id;      // "123", or "123_4" for an element of an array
  std::string state;   // PENDING, RUNNING, COMPLETED, ...
  std::string reason;  // why it pends (or "None")
  int wait_status = 0; // the job's wait status (as waitpid reports it) once it ended
  std::string nodes;   // where it runs or ran
  std::string name;
  int restarts = 0;    // how often Slurm requeued it (scontrol requeue, a failed node)
  std::string comment;
  /// Before its time limit ends it, as squeue computed it (a pending job: its whole limit), and
  /// that limit; none where it has none (UNLIMITED) or Slurm has not set one yet.
  std::optional<std::chrono::seconds> time_left, time_limit;
};

/// The `-O` argument that makes squeue print job_rows, '|' after each field (with -r, one row per
/// element of an array).
std::string squeue_fields();
/// A duration in Slurm's time format ("minutes", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM",
/// "D-HH:MM:SS"), as squeue prints TimeLeft and TimeLimit; none for anything else (UNLIMITED,
/// NOT_SET, INVALID).
std::optional<std::chrono::seconds> parse_slurm_time(std::string_view text);
/// Parses squeue's output; lines it cannot read are skipped.
std::vector<job_row> parse_squeue(std::string_view out);

/// The job has ended and its wait status is final.
bool ended_state(std::string_view state);
/// A pending reason that will not resolve itself (a partition that is down, a request no node
/// can satisfy, a limit of the account): waiting on would hang the caller forever.
bool hopeless_reason(std::string_view reason);
/// fiber's exit code from a wait status: the code, or -N for a signal N.
int exit_code_of(int wait_status);
/// A sentence about how a job in `state` ended, beyond its exit code ("" when there is nothing to add).
std::string ended_detail(std::string_view state);
/// What slurmstepd wrote to a job's or step's stderr when it killed it for its memory limit
/// ("StepId=3.batch exceeded memory limit (329760768 > 67108864), being killed": the step's
/// resident bytes and its limit), as a memory_stop in MiB; none when it wrote no such line.
std::optional<memory_stop> memory_stop_in(std::string_view stderr_text);

/// The job id `sbatch --parsable` printed ("123" or "123;cluster"), if it printed one.
std::optional<std::string> parse_sbatch_id(std::string_view out);
/// sbatch failed in a way worth one more try (the controller did not answer in time).
bool transient_error(std::string_view stderr_text);

/// Splits a config value of extra arguments at white space ("--exclusive --reservation=x").
std::vector<std::string> split_args(std::string_view text);

/// The name every Slurm job of a fiber job carries: fiber-<job>-<process>.
std::string job_name(const std::string& job_id, const std::string& process);
/// The comment that marks who submitted a job, so a later master can find leftovers of a dead one;
/// a durable run's worker (`durable`) outlives its master for a master taking the run up.
std::string master_comment(const std::string& master, bool durable = false);
/// The master named in a comment made by master_comment; empty when it is not fiber's.
std::string master_of_comment(std::string_view comment);
/// Whether a comment made by master_comment marks a durable run's worker.
bool durable_comment(std::string_view comment);

/// Resource and placement options for one child, common to sbatch and srun: -c, --mem, --gres,
/// partition, account, qos, time limit, constraint.
std::vector<std::string> resource_args(const spawn_spec& spec, const config& cfg);

/// The name of a job array of `n` children, the first named `first_process`.
std::string array_job_name(const std::string& job_id, const std::string& first_process, std::size_t n);
/// The signal Slurm sends a child ahead of its time limit, with how long ahead (--signal's
/// argument, "23@30"): drain_notice_ms, SIGURG. Empty with drain_notice_ms = 0: no notice.
std::string notice_signal(const config& cfg);
/// Children whose keys are equal ask sbatch for the same and run the same program: they can be
/// one job array.
std::string submission_key(const spawn_spec& spec, const config& cfg);

/// sbatch's arguments for job `name`: one child (`array_size` 0) or an array of `array_size`
/// children asking for what `spec` asks. The script comes on stdin (batch_script).
std::vector<std::string> sbatch_args(const spawn_spec& spec, const config& cfg, const std::string& master,
                                     const std::string& output_dir, const std::string& working_dir,
                                     const std::string& name, int array_size = 0);
/// The batch script of one child, or of an array whose element i runs specs[i]: the child's
/// environment, a check that the program is there, then exec.
std::string batch_script(const std::vector<const spawn_spec*>& specs);
inline std::string batch_script(const spawn_spec& spec) { return batch_script(std::vector{&spec}); }
/// srun's arguments for one child run as a step of the allocation, on `node`.
std::vector<std::string> srun_args(const spawn_spec& spec, const config& cfg, const std::string& node);

}  // namespace fiber::detail::slurm
