#include "backend/slurm/slurm_cli.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>

#include "backend/backend.hpp"
#include "backend/command.hpp"
#include "fiber/config.hpp"

namespace fiber::detail::slurm {

// JobArrayID and ArrayTaskID rather than JobID, which is a number of its own for each element.
std::string squeue_fields() {
  return "JobArrayID:|,ArrayTaskID:|,State:|,Reason:|,exit_code:|,NodeList:|,Name:|,RestartCnt:|,Comment:|,"
         "TimeLeft:|,TimeLimit:|";
}

std::optional<std::chrono::seconds> parse_slurm_time(std::string_view text) {
  long days = 0;
  bool with_days = false;
  if (auto dash = text.find('-'); dash != std::string_view::npos) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + dash, days);
    if (ec != std::errc() || end != text.data() + dash || dash == 0) return std::nullopt;
    with_days = true;
    text.remove_prefix(dash + 1);
  }
  std::array<long, 3> part{};
  std::size_t n = 0;
  for (;;) {
    if (n == part.size() || text.empty()) return std::nullopt;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), part[n]);
    if (ec != std::errc() || part[n] < 0) return std::nullopt;
    ++n;
    text.remove_prefix(static_cast<std::size_t>(end - text.data()));
    if (text.empty()) break;
    if (text.front() != ':') return std::nullopt;
    text.remove_prefix(1);
  }
  // After days: hours[:minutes[:seconds]]. Without: minutes, minutes:seconds or h:m:s.
  static constexpr std::array<std::array<long, 3>, 3> after_days{{{3600}, {3600, 60}, {3600, 60, 1}}};
  static constexpr std::array<std::array<long, 3>, 3> alone{{{60}, {60, 1}, {3600, 60, 1}}};
  auto& unit = (with_days ? after_days : alone)[n - 1];
  long seconds = days * 86400;
  for (std::size_t i = 0; i < n; ++i) seconds += part[i] * unit[i];
  return std::chrono::seconds(seconds);
}

namespace {
/// A tool's output, line by line, each line cut at '|' (a '|' after the last field, as squeue -O
/// writes, leaves an empty field at the end).
std::vector<std::vector<std::string_view>> bar_separated(std::string_view out) {
  std::vector<std::vector<std::string_view>> lines;
  while (!out.empty()) {
    auto eol = out.find('\n');
    auto line = out.substr(0, eol);
    out = eol == std::string_view::npos ? std::string_view{} : out.substr(eol + 1);
    auto& f = lines.emplace_back();
    for (std::size_t at = 0;;) {
      auto bar = line.find('|', at);
      f.push_back(line.substr(at, bar == std::string_view::npos ? std::string_view::npos : bar - at));
      if (bar == std::string_view::npos) break;
      at = bar + 1;
    }
  }
  return lines;
}
}  // namespace

std::vector<job_row> parse_squeue(std::string_view out) {
  std::vector<job_row> rows;
  for (auto& f : bar_separated(out)) {
    if (f.size() < 9 || f[0].empty()) continue;
    auto trim = [](std::string_view s) {
      while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
      while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
      return std::string(s);
    };
    auto task = trim(f[1]);  // N/A for a job that is not an array
    bool element = !task.empty() && std::all_of(task.begin(), task.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    // Slurm 22.05 prints an element's JobArrayID as base_task already; the manual says base.
    auto id = trim(f[0]);
    if (element && id.find('_') == std::string::npos) id += "_" + task;
    job_row r{id, trim(f[2]), trim(f[3]), 0, trim(f[5]), trim(f[6]), 0, trim(f[8]), std::nullopt, std::nullopt};
    if (f.size() >= 11) {
      r.time_left = parse_slurm_time(trim(f[9]));
      r.time_limit = parse_slurm_time(trim(f[10]));
    }
    auto code = trim(f[4]);
    std::from_chars(code.data(), code.data() + code.size(), r.wait_status);
    auto restarts = trim(f[7]);
    std::from_chars(restarts.data(), restarts.data() + restarts.size(), r.restarts);
    rows.push_back(std::move(r));
  }
  return rows;
}

bool ended_state(std::string_view state) {
  // Not COMPLETING: its exit status is not final yet (a cancelled job shows 0 there).
  static constexpr std::array ended{"COMPLETED", "FAILED",    "CANCELLED", "TIMEOUT",      "NODE_FAIL",
                                    "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED", "SPECIAL_EXIT",
                                    "REVOKED"};
  return std::find(ended.begin(), ended.end(), state) != ended.end();
}

bool hopeless_reason(std::string_view reason) {
  // ReFrame's list of reasons it cancels on, and the ones a bad request or account gets.
  static constexpr std::array hopeless{
      "FrontEndDown",   "NodeDown",         "PartitionDown",      "PartitionInactive", "PartitionNodeLimit",
      "PartitionConfig", "PartitionTimeLimit", "QOSJobLimit",     "QOSResourceLimit",  "QOSUsageThreshold",
      "ReqNodeNotAvail", "InvalidAccount",  "InvalidQOS",         "BadConstraints",    "DependencyNeverSatisfied",
      "AccountNotAllowed", "QOSNotAllowed", "Licenses"};
  for (auto h : hopeless)
    if (reason.starts_with(h)) return true;  // ReqNodeNotAvail comes with ", UnavailableNodes:..."
  return false;
}

int exit_code_of(int status) {
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return WEXITSTATUS(status);
}

std::optional<memory_stop> memory_stop_in(std::string_view stderr_text) {
  constexpr std::string_view said = "exceeded memory limit (";
  auto at = stderr_text.rfind(said);
  if (at == std::string_view::npos) return std::nullopt;
  unsigned long long used = 0, limit = 0;
  auto rest = std::string(stderr_text.substr(at + said.size(), 64));
  if (std::sscanf(rest.c_str(), "%llu > %llu)", &used, &limit) != 2 || limit == 0) return std::nullopt;
  constexpr unsigned long long mib = 1 << 20;
  return memory_stop{(limit + mib - 1) / mib, (used + mib - 1) / mib};
}

std::string ended_detail(std::string_view state) {
  if (state == "CANCELLED") return "its Slurm job was cancelled (scancel)";
  if (state == "TIMEOUT") return "its Slurm job reached its time limit (config key slurm_time_limit)";
  if (state == "NODE_FAIL") return "its node failed";
  if (state == "OUT_OF_MEMORY") return "its Slurm job ran out of memory (raise mem_per_job or the function's memory need)";
  if (state == "BOOT_FAIL") return "its node could not boot";
  if (state == "DEADLINE") return "its Slurm job missed its deadline";
  if (state == "PREEMPTED") return "its Slurm job was preempted";
  return {};
}

std::optional<std::string> parse_sbatch_id(std::string_view out) {
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.remove_suffix(1);
  auto semi = out.find(';');
  auto id = out.substr(0, semi);
  if (id.empty() || !std::all_of(id.begin(), id.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return std::nullopt;
  return std::string(id);
}

bool transient_error(std::string_view text) {
  for (auto s : {"Socket timed out", "Unable to contact slurm controller", "Resource temporarily unavailable",
                 "Slurm temporarily unable", "Zero Bytes were transmitted", "Connection refused"})
    if (text.find(s) != std::string_view::npos) return true;
  return false;
}

std::vector<std::string> split_args(std::string_view text) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    auto start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i > start) out.emplace_back(text.substr(start, i - start));
  }
  return out;
}

std::string job_name(const std::string& job_id, const std::string& process) {
  std::string out = "fiber-" + job_id + "-";
  for (char c : process) out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ? c : '_';
  return out;
}

std::vector<node_room> parse_sinfo_rooms(std::string_view out) {
  std::vector<node_room> rooms;
  for (auto& f : bar_separated(out)) {
    if (f.size() < 4 || f[0].empty()) continue;
    node_room room;
    room.name = std::string(f[0]);
    room.cpus = std::atof(std::string(f[1]).c_str());
    room.memory_mb = std::atoll(std::string(f[2]).c_str());
    room.gpus = 0;
    // gres: comma-separated name[:type]:count[(extra)]; a GPU count is the last number of "gpu..."
    for (std::size_t at = 0; at < f[3].size();) {
      auto comma = f[3].find(',', at);
      auto item = f[3].substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
      at = comma == std::string_view::npos ? f[3].size() : comma + 1;
      if (!item.starts_with("gpu:")) continue;
      item = item.substr(0, item.find('('));
      room.gpus += std::atoll(std::string(item.substr(item.rfind(':') + 1)).c_str());
    }
    bool seen = false;
    for (auto& r : rooms) seen = seen || r.name == room.name;
    if (!seen) rooms.push_back(std::move(room));
  }
  return rooms;
}

std::string master_comment(const std::string& master, bool durable) {
  return "fiber master=" + master + (durable ? " durable" : "");
}

bool durable_comment(std::string_view comment) {
  return !master_of_comment(comment).empty() && comment.ends_with(" durable");
}

std::string master_of_comment(std::string_view comment) {
  constexpr std::string_view prefix = "fiber master=";
  if (!comment.starts_with(prefix)) return {};
  auto rest = comment.substr(prefix.size());
  return std::string(rest.substr(0, rest.find(' ')));
}

std::vector<std::string> resource_args(const spawn_spec& spec, const config& cfg) {
  std::vector<std::string> a;
  // A hub that forks its node's children holds the node (sbatch --exclusive, srun --whole).
  if (!spec.whole_host) a.push_back("--cpus-per-task=" + std::to_string(std::max(spec.cpu, 1)));
  if (spec.memory_mb > 0) a.push_back("--mem=" + std::to_string(spec.memory_mb) + "M");
  if (spec.gpu > 0) a.push_back("--gres=gpu:" + std::to_string(spec.gpu));
  if (!cfg.slurm_partition.empty()) a.push_back("--partition=" + cfg.slurm_partition);
  if (!cfg.slurm_account.empty()) a.push_back("--account=" + cfg.slurm_account);
  if (!cfg.slurm_qos.empty()) a.push_back("--qos=" + cfg.slurm_qos);
  if (!cfg.slurm_time_limit.empty()) a.push_back("--time=" + cfg.slurm_time_limit);
  if (!cfg.slurm_constraint.empty()) a.push_back("--constraint=" + cfg.slurm_constraint);
  return a;
}

std::string notice_signal(const config& cfg) {
  // SIGURG, whose default is to be ignored: a child that does not listen for the notice (a
  // process's target, a host hub) goes on until the time limit's own SIGTERM, where SIGUSR1's
  // default would end it early. Slurm may send it up to a minute before the time asked.
  if (cfg.drain_notice_ms == 0) return {};
  return std::to_string(SIGURG) + "@" + std::to_string(std::max(1, (cfg.drain_notice_ms + 999) / 1000));
}

std::string array_job_name(const std::string& job_id, const std::string& first_process, std::size_t n) {
  return job_name(job_id, first_process) + "-x" + std::to_string(n);
}

std::string submission_key(const spawn_spec& spec, const config& cfg) {
  std::string key = spec.executable;
  for (auto& a : spec.args) key += '\0' + a;
  for (auto& r : resource_args(spec, cfg)) key += '\0' + r;
  key += '\0';
  key += "host=" + spec.host;  // one array, one placement
  if (spec.whole_host) key += std::string_view("\0whole", 6);
  return key;
}

std::vector<std::string> sbatch_args(const spawn_spec& spec, const config& cfg, const std::string& master,
                                     const std::string& output_dir, const std::string& working_dir,
                                     const std::string& name, int array_size) {
  auto output = output_dir + "/" + name + (array_size > 0 ? "_%a" : "");
  std::vector<std::string> a{"sbatch", "--parsable", "--job-name=" + name, "--comment=" + master_comment(master, workers_wait_for_next_master(cfg)),
                             "--nodes=1", "--ntasks=1",
                             // A worker that ran once must not run again with the same token.
                             "--no-requeue", "--output=" + output + ".out", "--error=" + output + ".err"};
  if (array_size > 0) a.push_back("--array=0-" + std::to_string(array_size - 1));
  if (!spec.host.empty()) a.push_back("--nodelist=" + spec.host);
  if (spec.whole_host) a.emplace_back("--exclusive");
  // Notice of the time limit (the script execs the worker: B reaches it, and only it).
  if (auto notice = notice_signal(cfg); !notice.empty()) a.push_back("--signal=B:" + notice);
  if (!working_dir.empty()) a.push_back("--chdir=" + working_dir);
  for (auto& r : resource_args(spec, cfg)) a.push_back(std::move(r));
  for (auto& x : split_args(cfg.slurm_sbatch_args)) {
    // A host hub shares its node with the children it serves (one that forks them has it whole).
    if (!spec.host.empty() && x == "--exclusive") continue;
    a.push_back(std::move(x));
  }
  return a;
}

namespace {
std::string exports(const spawn_spec& spec, const std::string& indent) {
  std::string s;
  for (auto& [k, v] : spec.env) s += indent + "export " + k + "=" + shell_quote(v) + "\n";
  return s;
}
}  // namespace

std::string batch_script(const std::vector<const spawn_spec*>& specs) {
  auto& first = *specs.front();
  std::string s = "#!/bin/sh\n# fiber worker " + first.name + (specs.size() > 1 ? " and the next " + std::to_string(specs.size() - 1) : "") +
                  " of job " + first.job_id + "\n";
  if (specs.size() == 1) {
    s += exports(first, "");
  } else {
    // One environment per element: its token and name.
    s += "case \"$SLURM_ARRAY_TASK_ID\" in\n";
    for (std::size_t i = 0; i < specs.size(); ++i) s += std::to_string(i) + ")\n" + exports(*specs[i], "  ") + "  ;;\n";
    s += "*)\n  echo \"fiber: element $SLURM_ARRAY_TASK_ID is not in this job array\" >&2\n  exit 2\n  ;;\nesac\n";
  }
  auto exe = shell_quote(first.executable);
  s += "if [ ! -x " + exe + " ]; then\n";
  s += "  echo \"fiber: cannot run " + first.executable +
       " on node $(hostname): it is not there or not executable; every node must see the program at the "
       "same path (a shared file system), or set the config key 'executable'\" >&2\n";
  s += "  exit 127\nfi\nexec " + exe;
  for (auto& a : first.args) s += " " + shell_quote(a);
  return s + "\n";
}

std::vector<std::string> srun_args(const spawn_spec& spec, const config& cfg, const std::string& node) {
  std::vector<std::string> a{"srun", "--overlap", spec.whole_host ? "--whole" : "--exact", "--nodes=1", "--ntasks=1",
                             "--job-name=" + job_name(spec.job_id, spec.name), "--input=none",
                             "--quiet"};
  if (!node.empty()) a.push_back("--nodelist=" + node);
  for (auto& r : resource_args(spec, cfg)) {
    // A step lives inside its job: the job's partition, account, qos and constraint apply.
    if (r.starts_with("--partition=") || r.starts_with("--account=") || r.starts_with("--qos=") ||
        r.starts_with("--constraint="))
      continue;
    a.push_back(std::move(r));
  }
  if (auto notice = notice_signal(cfg); !notice.empty()) a.push_back("--signal=" + notice);  // ahead of the allocation's limit
  for (auto& x : split_args(cfg.slurm_srun_args)) a.push_back(std::move(x));
  a.push_back(spec.executable);
  for (auto& x : spec.args) a.push_back(x);
  return a;
}

}  // namespace fiber::detail::slurm
