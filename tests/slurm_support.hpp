// The Slurm side of the tests: the test cluster started by scripts/engines.sh, and the jobs a
// master left in it. Needs src/ on the include path.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/command.hpp"
#include "backend/slurm/slurm_cli.hpp"

namespace fiber_test {

/// Points SLURM_CONF at the test cluster's configuration unless the caller named one.
inline void use_test_cluster() {
  if (std::getenv("SLURM_CONF")) return;
  std::string conf = FIBER_TEST_SOURCE_DIR "/build/engines/slurm/slurm.conf";
  if (std::filesystem::exists(conf)) ::setenv("SLURM_CONF", conf.c_str(), 1);
}

/// Slurm jobs of master `owner` (host:pid) that are still queued or running.
inline std::vector<fiber::detail::slurm::job_row> live_slurm_jobs_of(const std::string& owner) {
  namespace slurm = fiber::detail::slurm;
  auto r = fiber::detail::run_command({"squeue", "-h", "-r", "-u", std::to_string(::getuid()), "-t",
                                       "PENDING,RUNNING,SUSPENDED,CONFIGURING", "-O", slurm::squeue_fields()});
  std::vector<slurm::job_row> out;
  for (auto& row : slurm::parse_squeue(r.out))
    if (slurm::master_of_comment(row.comment) == owner) out.push_back(row);
  return out;
}

}  // namespace fiber_test
