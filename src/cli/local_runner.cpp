#include "cli/local_runner.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/local/local_resources.hpp"
#include "cli/master_restarts.hpp"
#include "fiber/config.hpp"
#include "fiber/error.hpp"

namespace fiber::cli {
namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (auto& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

/// Forks the master: its environment, its limits, then the program.
pid_t start_master(const run_options& o, const detail::spawn_spec& master, const detail::local_grant& grant,
                   const std::vector<std::string>& left_for_children) {
  using namespace fiber::detail;
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::setenv("FIBER_BACKEND", "local", 1);
  if (master.gpu > 0) {
    auto mine = joined(grant.gpus);
    ::setenv("CUDA_VISIBLE_DEVICES", mine.c_str(), 1);
    ::setenv("NVIDIA_VISIBLE_DEVICES", mine.c_str(), 1);
    // Its children share what is left; NVML would otherwise hand them the master's devices too.
    auto rest = left_for_children.empty() ? std::string("none") : joined(left_for_children);
    ::setenv("FIBER_GPUS", rest.c_str(), 1);  // --env FIBER_GPUS=... below still decides
  }
  // Here the master's page is on this host already: it prints its address itself.
  if (o.dashboard) ::setenv("FIBER_DASHBOARD", "true", 1);
  for (auto& kv : o.env)
    if (auto eq = kv.find('='); eq != std::string::npos) ::setenv(kv.substr(0, eq).c_str(), kv.c_str() + eq + 1, 1);
  auto problems = apply_limits(grant.cpus, static_cast<std::uint64_t>(master.memory_mb));
  if (!problems.empty()) {
    std::fprintf(stderr, "fiber: %s\n", problems.c_str());
    ::_exit(125);
  }
  std::vector<char*> argv;
  argv.reserve(o.command.size() + 1);
  for (auto& a : o.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "fiber: cannot run %s: %s\n", argv[0], std::strerror(errno));
  ::_exit(127);
}

}  // namespace

int run_locally(const run_options& o) {
  using namespace fiber::detail;
  if (o.command.empty()) throw error(errc::config_error, "nothing to run: give the program after --");
  // The master's needs, weighed and granted as a local child's would be.
  spawn_spec master;
  master.name = "the master (fiber run --backend local)";
  master.gpu = o.gpu;
  master.cpu = o.cpu > 0 ? static_cast<int>(std::ceil(o.cpu)) : 1;
  master.cpu_declared = o.cpu > 0;
  master.memory_mb = static_cast<int>((o.memory_bytes + (1 << 20) - 1) >> 20);
  local_grant grant;
  std::vector<std::string> left_for_children;
  if (master.gpu > 0 || master.cpu_declared) {
    local_resources host(find_gpus(config::load().gpus), allowed_cpus());
    try {
      host.check(master);  // errc::unsatisfiable, naming what was asked and what exists
    } catch (const error& e) {
      throw error(e.code(), e.reason() + "; for the master itself: lower --gpu or --cpu");
    }
    grant = host.try_take(master).value();  // nothing else holds this host's slots here
    for (auto& id : host.gpus().ids)
      if (std::find(grant.gpus.begin(), grant.gpus.end(), id) == grant.gpus.end()) left_for_children.push_back(id);
  }

  // A durable master that died by a signal starts again, as often as --restarts allows, and
  // takes its run up from the journal (apply_durable gave it its run id).
  master_restarts restarts(o.restarts);
  for (;;) {
    pid_t pid = start_master(o, master, grant, left_for_children);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (std::string said; restarts.again(status, said)) {
      std::fprintf(stderr, "fiber: %s\n", said.c_str());
      continue;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
}

}  // namespace fiber::cli
