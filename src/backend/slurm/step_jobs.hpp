// Children as job steps of the allocation the master runs in (sbatch/salloc): `srun --overlap
// --exact -N1 -n1` per child, no queue wait, spread over the allocation's nodes.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "fiber/config.hpp"

namespace fiber::detail {
class command_thread;
}

namespace fiber::detail::slurm {

class step_jobs {
 public:
  /// `nodes`: the allocation's nodes, in order.
  step_jobs(asio::io_context& io, const fiber::config& cfg, std::vector<std::string> nodes);

  std::unique_ptr<job> start(const spawn_spec& spec);

  /// CPUs this master's live steps use on each node: a new step goes where the fewest are used.
  struct load {
    std::map<std::string, int> cpus;
  };

 private:
  asio::io_context& io_;
  fiber::config cfg_;
  std::shared_ptr<command_thread> commands_;
  std::vector<std::string> nodes_;
  std::shared_ptr<load> load_ = std::make_shared<load>();
};

}  // namespace fiber::detail::slurm
