#include "cli/slurm_runner.hpp"

#include "core/private_files.hpp"

#include <csignal>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "backend/backend.hpp"
#include "backend/command.hpp"
#include "backend/slurm/slurm_cli.hpp"
#include "cli/run_names.hpp"
#include "cli/run_standing.hpp"
#include "transport/http_client.hpp"
#include "fiber/config.hpp"
#include "fiber/error.hpp"

namespace fiber::cli {
namespace fs = std::filesystem;
using detail::command_result;
using detail::run_command;
using detail::shell_quote;
using detail::slurm::job_row;

namespace {

constexpr std::string_view run_comment_prefix = "fiber run=";

std::string runs_dir() {
  // Shared with the nodes (a run's master writes its output there), and the user's own.
  return detail::home_folder(".fiber/runs", "slurm_dir");
}

std::string output_of(const std::string& name) { return runs_dir() + "/" + name + ".out"; }

/// The run named in a comment "fiber run=NAME user=USER", when it is this user's.
std::string run_of_comment(std::string_view comment) {
  if (!comment.starts_with(run_comment_prefix)) return {};
  auto rest = comment.substr(run_comment_prefix.size());
  auto name = std::string(rest.substr(0, rest.find(' ')));
  auto user = rest.find(" user=");
  if (user == std::string_view::npos || rest.substr(user + 6) != user_name()) return {};
  return name;
}

command_result slurm(const std::vector<std::string>& argv, const std::string& input = {}) {
  auto r = run_command(argv, input, std::chrono::seconds(60));
  if (r.code == -1 && !r.failure.empty() && r.failure.find("cannot") != std::string::npos)
    throw error(errc::backend_unavailable, "cannot run " + argv[0] + " (" + r.problem() +
                                               "): install Slurm's client commands (slurm-client) and point "
                                               "SLURM_CONF at the cluster's slurm.conf");
  return r;
}

std::vector<job_row> jobs() {
  auto r = slurm({"squeue", "-h", "-r", "--states=all", "-O", detail::slurm::squeue_fields()});
  if (!r.ok())
    throw error(errc::backend_unavailable,
                "squeue failed (" + r.problem() + "): is the Slurm controller up, and SLURM_CONF pointing at it?");
  return detail::slurm::parse_squeue(r.out);
}

std::optional<job_row> run_job(const std::string& name) {
  std::optional<job_row> found;
  for (auto& j : jobs())
    if (run_of_comment(j.comment) == name) found = j;  // the latest of that name
  return found;
}

job_row run_job_or_fail(const std::string& name) {
  auto j = run_job(name);
  if (!j)
    throw error(errc::config_error, "no run named '" + name +
                                        "' in Slurm's queue (ended runs leave it after MinJobAge): `fiber ps` lists "
                                        "yours; its output stays in " + output_of(name));
  return *j;
}

/// Worker jobs of run `name` (their comment names master NAME:PID).
std::vector<job_row> workers_of(const std::string& name, const std::vector<job_row>& all) {
  std::vector<job_row> out;
  for (auto& j : all) {
    auto m = detail::slurm::master_of_comment(j.comment);
    if (m.substr(0, m.rfind(':')) == name) out.push_back(j);
  }
  return out;
}

volatile std::sig_atomic_t interrupted = 0;

/// Copies what `file` gained since `offset` to stdout.
void drain(const std::string& file, std::uintmax_t& offset) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return;
  in.seekg(static_cast<std::streamoff>(offset));
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    std::fwrite(buf, 1, static_cast<std::size_t>(in.gcount()), stdout);
    offset += static_cast<std::uintmax_t>(in.gcount());
  }
  std::fflush(stdout);
}

/// Follows `file` while job `id` is queued or runs (Slurm has no event stream: its state is
/// asked once a second); the job's final row, or nothing when Ctrl-C came first.
std::optional<job_row> follow(const std::string& id, const std::string& file) {
  std::uintmax_t offset = 0;
  struct sigaction sa {};
  sa.sa_handler = [](int) { interrupted = 1; };
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  std::string last_reason;
  for (;;) {
    drain(file, offset);
    if (interrupted) return std::nullopt;
    std::optional<job_row> row;
    for (auto& j : jobs())
      if (j.id == id) row = j;
    if (!row || detail::slurm::ended_state(row->state)) {
      drain(file, offset);
      if (!row) throw error(errc::backend_unavailable, "job " + id + " left Slurm's queue before fiber saw it end");
      return row;
    }
    if (row->state == "PENDING" && row->reason != last_reason && row->reason != "None") {
      last_reason = row->reason;
      std::fprintf(stderr, "fiber: job %s pending: %s\n", id.c_str(), row->reason.c_str());
      if (detail::slurm::hopeless_reason(row->reason)) {
        slurm({"scancel", id});
        throw error(errc::config_error, "job " + id + " cannot start: " + row->reason +
                                            " (cancelled): ask for what a node of the partition has");
      }
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

/// Cancels `ids` and returns once Slurm reports each ended (or forgot it): a stopped run is
/// stopped when the command returns. Slurm has no event stream: its queue is asked once a second.
void cancel_and_wait(const std::vector<std::string>& ids) {
  if (ids.empty()) return;
  auto args = std::vector<std::string>{"scancel"};
  args.insert(args.end(), ids.begin(), ids.end());
  if (auto r = slurm(args); !r.ok()) throw error(errc::backend_unavailable, "scancel failed: " + r.problem());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  for (;;) {
    bool left = false;
    for (auto& j : jobs())
      for (auto& id : ids)
        left = left || (j.id == id && !detail::slurm::ended_state(j.state));
    if (!left) return;
    if (std::chrono::steady_clock::now() > deadline)
      throw error(errc::backend_unavailable, "Slurm has not ended the cancelled jobs after 2 minutes: see `squeue`");
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace

std::string run_script(const std::vector<std::string>& env, const std::vector<std::string>& command) {
  std::string s = "#!/bin/sh\n# fiber run: the master of a fiber program\n";
  for (auto& kv : env) {
    auto eq = kv.find('=');
    s += "export " + kv.substr(0, eq) + "=" + shell_quote(kv.substr(eq + 1)) + "\n";
  }
  s += "exec";
  for (auto& a : command) s += " " + shell_quote(a);
  return s + "\n";
}

namespace {

/// A run as a batch job of its own; its workers are batch jobs too.
class slurm_launch final : public launch {
 public:
  slurm_launch(std::string name, std::vector<std::string> args, std::string script)
      : launch(std::move(name)), args_(std::move(args)), script_(std::move(script)) {}

  boost::json::object plan() const override {
    return boost::json::object{{"sbatch", boost::json::value_from(args_)}, {"script", script_}};
  }

  void prepare() override {
    if (run_job(name())) throw error(errc::config_error, "a run named '" + name() + "' is in Slurm's queue already: pick another --name");
    std::error_code ec;
    detail::make_private_folder(runs_dir(), ec);
    if (ec) throw error(errc::config_error, "cannot make " + runs_dir() + " for the run's output: " + ec.message());
    fs::remove(output_of(name()), ec);
  }

  std::string create() override {
    auto r = slurm(args_, script_);
    auto id = r.ok() ? detail::slurm::parse_sbatch_id(r.out) : std::nullopt;
    if (!id) throw error(errc::spawn_failed, "sbatch refused the run: " + r.problem());
    id_ = *id;
    return "submitted " + name() + " (Slurm job " + id_ + "; output " + output_of(name()) + ")";
  }

  std::optional<int> follow(bool attach) override {
    if (!attach) return 0;
    auto end = cli::follow(id_, output_of(name()));
    if (!end) return std::nullopt;
    if (auto detail = detail::slurm::ended_detail(end->state); !detail.empty())
      std::fprintf(stderr, "fiber: %s %s\n", name().c_str(), detail.c_str());
    int code = detail::slurm::exit_code_of(end->wait_status);
    return code < 0 ? 128 - code : code;
  }

 private:
  std::vector<std::string> args_;
  std::string script_, id_;
};

}  // namespace

std::unique_ptr<launch> slurm_runner::plan_run(const run_options& o) {
  auto not_here = [](const char* flag) {
    throw error(errc::config_error, std::string(flag) +
                                        " has no meaning on slurm: the master and its workers run the program from "
                                        "this file system, which the cluster's nodes share; leave it out");
  };
  if (!o.image.empty()) not_here("--image");
  if (o.build) not_here("--build");
  if (!o.registry.empty() && !std::getenv("FIBER_REGISTRY")) not_here("--registry");
  if (!o.volumes.empty()) not_here("-v");
  auto command = o.command;
  std::error_code ec;
  if (command[0].find('/') != std::string::npos) {
    auto exe = fs::canonical(command[0], ec);
    if (ec) throw error(errc::config_error, "program " + command[0] + " is not here: build it first");
    command[0] = exe.string();
  }
  auto name = o.name.empty() ? default_run_name(command[0]) : o.name;
  check_run_name(name);
  std::vector<std::string> env{"FIBER_BACKEND=slurm", "FIBER_RUN_NAME=" + name,
                               // Workers as batch jobs of their own, each with its own resources:
                               // the master's job holds only what the master asked for.
                               "FIBER_SLURM_MODE=batch"};
  env.insert(env.end(), o.env.begin(), o.env.end());
  detail::spawn_spec spec;
  spec.cpu = o.cpu > 0 ? static_cast<int>(std::ceil(o.cpu)) : 1;
  spec.memory_mb = static_cast<int>(o.memory_bytes / (std::int64_t{1024} * 1024));
  spec.gpu = o.gpu;
  auto cfg = fiber::config::load();
  std::vector<std::string> args{"sbatch", "--parsable", "--job-name=" + name,
                                "--comment=" + std::string(run_comment_prefix) + name + " user=" + user_name(),
                                // A durable master is requeue-able (a drained node, preemption,
                                // scontrol requeue): it runs again with its run id and takes its run
                                // up; its output goes on in the same file.
                                "--nodes=1", "--ntasks=1", o.durable ? "--requeue" : "--no-requeue",
                                o.durable ? "--open-mode=append" : "--open-mode=truncate", "--output=" + output_of(name),
                                "--chdir=" + fs::current_path().string()};
  // The notice of its time limit: a durable master has Slurm requeue it then (a time limit never
  // requeues a job by itself), and the run goes on (the script execs the program: B reaches it).
  if (auto notice = detail::slurm::notice_signal(cfg); o.durable && !notice.empty()) args.push_back("--signal=B:" + notice);
  for (auto& r : detail::slurm::resource_args(spec, cfg)) args.push_back(r);
  auto script = run_script(env, command);
  return std::make_unique<slurm_launch>(std::move(name), std::move(args), std::move(script));
}

int slurm_runner::ps() {
  auto all = jobs();
  std::printf("%-32s %-10s %-8s %-24s %s\n", "NAME", "STATE", "JOB", "REASON", "WORKERS");
  for (auto& j : all) {
    auto name = run_of_comment(j.comment);
    if (name.empty()) continue;
    int running = 0;
    for (auto& w : workers_of(name, all))
      if (w.state == "RUNNING") ++running;
    // A requeued master (a durable run's) waits to take its run up: resuming, then running again.
    auto state = run_state(j.state, j.restarts, j.state == "PENDING");
    auto reason = with_restarts(j.state == "PENDING" ? j.reason : std::string(), j.restarts);
    std::printf("%-32s %-10s %-8s %-24s %d\n", name.c_str(), state.c_str(), j.id.c_str(), reason.c_str(), running);
  }
  return 0;
}

int slurm_runner::logs(const logs_options& o) {
  if (!o.process.empty())
    throw error(errc::config_error, "--process on slurm: a worker's output is in the master's slurm_dir folder "
                                    "(docs/backends.md); `fiber logs` shows the master's");
  auto file = output_of(o.name);
  if (!o.follow) {
    std::uintmax_t offset = 0;
    if (!fs::exists(file)) run_job_or_fail(o.name);  // says no such run, or prints nothing yet
    drain(file, offset);
    return 0;
  }
  auto j = run_job_or_fail(o.name);
  follow(j.id, file);
  return 0;
}

int slurm_runner::stop(const std::string& name) {
  auto j = run_job_or_fail(name);
  // The master gets SIGTERM and cancels its workers itself; what it leaves goes after.
  cancel_and_wait({j.id});
  std::vector<std::string> left;
  for (auto& w : workers_of(name, jobs()))
    if (!detail::slurm::ended_state(w.state)) left.push_back(w.id);
  cancel_and_wait(left);
  std::fprintf(stderr, "fiber: stopped %s (job %s)%s\n", name.c_str(), j.id.c_str(),
               left.empty() ? "" : (", and cancelled " + std::to_string(left.size()) + " worker job(s)").c_str());
  return 0;
}

int slurm_runner::gc() {
  auto all = jobs();
  std::map<std::string, bool> run_alive;
  for (auto& j : all)
    if (auto n = run_of_comment(j.comment); !n.empty()) run_alive[n] = run_alive[n] || !detail::slurm::ended_state(j.state);
  std::vector<std::string> doomed;
  for (auto& w : all) {
    auto m = detail::slurm::master_of_comment(w.comment);
    auto run = m.substr(0, m.rfind(':'));
    auto it = run_alive.find(run);
    if (m.empty() || it == run_alive.end() || it->second || detail::slurm::ended_state(w.state)) continue;
    std::printf("cancelling worker job %s of ended run %s\n", w.id.c_str(), run.c_str());
    doomed.push_back(w.id);
  }
  cancel_and_wait(doomed);
  std::printf("%zu job(s) cancelled\n", doomed.size());
  return 0;
}

int slurm_runner::cp(const copy_options& o) {
  throw error(errc::config_error, "fiber cp " + o.src + " " + o.dst +
                                      ": Slurm's nodes share this file system, which is where a run keeps its files: "
                                      "use cp");
}

std::string slurm_runner::master_output(const std::string& name) {
  // The batch script's output: stdout and stderr together (sbatch --output, no --error).
  std::ifstream in(output_of(name));
  if (!in) run_job_or_fail(name);  // says there is no such run
  return {std::istreambuf_iterator<char>(in), {}};
}

dashboard_route slurm_runner::route_to_master(const std::string& name, int port) {
  auto j = run_job_or_fail(name);
  if (j.state != "RUNNING")
    throw error(errc::config_error, "run " + name + "'s master is " + j.state + ", not running: its page is there while it runs");
  // The node's address as Slurm knows it (NodeAddr), which this host reaches as the nodes' master does.
  auto r = slurm({"sinfo", "-h", "-N", "-n", j.nodes, "-o", "%N|%o"});
  std::string address;
  for (std::size_t at = 0; r.ok() && at < r.out.size();) {
    auto nl = r.out.find('\n', at);
    auto line = r.out.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    at = nl == std::string::npos ? r.out.size() : nl + 1;
    if (auto bar = line.find('|'); bar != std::string::npos && line.substr(0, bar) == j.nodes) address = line.substr(bar + 1);
  }
  if (address.empty())
    throw error(errc::backend_unavailable, "sinfo does not say the address of node " + j.nodes + ", where run " + name +
                                               "'s master runs (" + r.problem() + ")");
  return [base = "http://" + address + ":" + std::to_string(port)](detail::http_request& req, const std::string& target) {
    req.url = base + target;
  };
}

}  // namespace fiber::cli
