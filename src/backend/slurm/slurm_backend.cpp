// Slurm backend: every child is Slurm work on a node of the cluster. Inside an allocation (the
// master started by sbatch or salloc) a child is a job step; outside, a batch job. Children reach
// the master over TCP (CURVE), on the address this host uses to reach the nodes.
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

#include "core/private_files.hpp"
#include "backend/backend.hpp"
#include "backend/command.hpp"
#include "backend/secret_store.hpp"
#include "backend/slurm/batch_jobs.hpp"
#include "backend/slurm/slurm_cli.hpp"
#include "backend/slurm/step_jobs.hpp"
#include "fiber/config.hpp"
#include "fiber/error.hpp"
#include "core/log.hpp"
#include "core/worker_env.hpp"
#include "transport/reachable_address.hpp"

namespace fiber::detail {
namespace {

std::string short_name(const std::string& host) { return host.substr(0, host.find('.')); }

/// Runs a Slurm command the backend cannot start without; an error naming it and its answer.
std::string ask_slurm(const std::vector<std::string>& argv) {
  auto r = run_command(argv, {}, std::chrono::seconds(30));
  if (!r.ok()) {
    std::string cmd;
    for (auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    throw error(errc::backend_unavailable, "backend=slurm: '" + cmd + "' failed: " + r.problem() +
                                               " (is this machine a Slurm client with a reachable controller? "
                                               "SLURM_CONF names the cluster's slurm.conf)");
  }
  return r.out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto eol = text.find('\n', pos);
    auto line = text.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    if (!line.empty()) out.push_back(line);
    pos = eol == std::string::npos ? text.size() : eol + 1;
  }
  return out;
}

/// Whether `address` belongs to this host (it can be bound).
bool is_local_address(const std::string& address) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (::inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1) return false;
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  if (fd >= 0) ::close(fd);
  return ok;
}

std::string default_output_dir(const fiber::config& cfg) {
  if (!cfg.slurm_dir.empty()) return cfg.slurm_dir;
  return home_folder(".fiber/slurm", "slurm_dir");
}

class slurm_backend final : public tcp_backend {
 public:
  slurm_backend(asio::io_context& io, const fiber::config& cfg, const std::string& job_id)
      : cfg_(cfg), master_(master_mark()) {
    const char* allocation = std::getenv("SLURM_JOB_ID");
    bool in_allocation = allocation && *allocation;
    steps_ = cfg.slurm_mode == "steps" || (cfg.slurm_mode == "auto" && in_allocation);
    if (steps_ && !in_allocation)
      throw error(errc::config_error,
                  "slurm_mode=steps needs an allocation (SLURM_JOB_ID is not set): start the master with sbatch or "
                  "salloc, or use slurm_mode=batch (or auto)");
    std::vector<std::string> nodes;
    if (steps_) {
      const char* list = std::getenv("SLURM_JOB_NODELIST");
      if (!list || !*list) throw error(errc::config_error, "inside a Slurm allocation but SLURM_JOB_NODELIST is not set");
      nodes = lines_of(ask_slurm({"scontrol", "show", "hostnames", list}));
    }
    pick_address(nodes);
    load_rooms(nodes);
    if (steps_) {
      logf(log_level::debug, "slurm: children are steps of job ", allocation, " on ", nodes.size(), " node(s)");
      steps_jobs_ = std::make_unique<slurm::step_jobs>(io, cfg_, std::move(nodes));
    } else {
      slurm::cancel_jobs_of_dead_masters();
      batch_ = std::make_unique<slurm::batch_jobs>(io, cfg_, master_, default_output_dir(cfg) + "/" + job_id + "-" +
                                                                         std::to_string(::getpid()));
    }
  }

  std::string name() const override { return "slurm"; }

  void check_capacity(const spawn_spec& spec) const override {
    if (rooms_.empty()) return;  // sinfo said nothing: Slurm's own refusal decides
    check_rooms(rooms_, spec,
                {where_, "gres gpu",
                 cfg_.slurm_partition.empty() ? "use a partition whose nodes have it (slurm_partition)"
                                              : "use another partition (slurm_partition)"});
  }

  /// Every node children may run on (the allocation's, else the partition's, else the cluster's),
  /// as sinfo named them.
  std::vector<hub_host> hub_hosts() const override {
    std::vector<hub_host> hosts;
    hosts.reserve(rooms_.size());
    for (auto& r : rooms_) hosts.push_back({r.name, static_cast<int>(r.cpus)});
    return hosts;
  }

  std::unique_ptr<job> spawn(const spawn_spec& given) override {
    auto spec = given;
    if (!spec.secret.empty()) {
      // A job's environment and script are shown to others (scontrol show job, without
      // PrivateData; sbatch scripts to the admins): the credentials wait in a file of this user's
      // on the file system the nodes share, and the child is told only where.
      if (!secrets_) secrets_.emplace(secret_store::in_folder(default_output_dir(cfg_)));
      spec.env.emplace_back(env_keys_file, secrets_->path_for(spec.secret));
      spec.secret.clear();
    }
    return steps_ ? steps_jobs_->start(spec) : batch_->submit(spec);
  }

  std::unique_ptr<job> adopt(const std::string& handle) override {
    // A step ends with its allocation: a master taking the run up has another.
    if (steps_)
      throw error(errc::unsatisfiable, "the slurm backend cannot take up " + handle +
                                           ", a worker of an earlier master of the run: in an allocation workers are its job "
                                           "steps and end with it; run a durable master outside an allocation, where its "
                                           "workers are batch jobs that wait for the next master");
    return batch_->adopt(handle);
  }

 private:
  /// sinfo, one line per node, of the nodes children may run on: the allocation's, else the
  /// partition's, else the cluster's.
  std::vector<std::string> sinfo_of(const std::vector<std::string>& allocation_nodes, const char* format) const {
    std::vector<std::string> args{"sinfo", "-h", "-N", "-o", format};
    if (!allocation_nodes.empty()) {
      std::string list;
      for (auto& n : allocation_nodes) list += (list.empty() ? "" : ",") + n;
      args.push_back("--nodes=" + list);
    } else if (!cfg_.slurm_partition.empty()) {
      args.push_back("--partition=" + cfg_.slurm_partition);
    }
    return args;
  }

  /// What each node has, for check_capacity (cpus, memory, gres GPUs).
  void load_rooms(const std::vector<std::string>& allocation_nodes) {
    rooms_ = slurm::parse_sinfo_rooms(ask_slurm(sinfo_of(allocation_nodes, slurm::sinfo_room_format.data())));
    where_ = "the " + std::to_string(rooms_.size()) +
             (!allocation_nodes.empty()          ? " nodes of this allocation"
              : !cfg_.slurm_partition.empty() ? " nodes of partition " + cfg_.slurm_partition
                                              : " nodes of the cluster") +
             " (sinfo)";
  }

  /// Where children reach the master: master_address, else the address of this host on the route
  /// to the nodes (never every interface without need).
  void pick_address(const std::vector<std::string>& allocation_nodes) {
    if (!cfg_.master_address.empty()) {
      advertise_host_ = cfg_.master_address;
      bind_host_ = is_local_address(cfg_.master_address) ? cfg_.master_address : "0.0.0.0";
      return;
    }
    auto args = sinfo_of(allocation_nodes, "%N|%o");
    auto me = short_name(this_host());
    std::string chosen, chosen_node;
    auto listed = lines_of(ask_slurm(args));
    if (listed.empty() && !cfg_.slurm_partition.empty())
      throw error(errc::config_error, "backend=slurm: partition '" + cfg_.slurm_partition +
                                          "' (config key slurm_partition) has no nodes or does not exist; sinfo "
                                          "lists the cluster's partitions");
    for (auto& line : listed) {
      auto bar = line.find('|');
      if (bar == std::string::npos) continue;
      auto node = line.substr(0, bar), address = line.substr(bar + 1);
      auto source = source_address_towards(address);
      if (source.empty()) continue;
      bool other = short_name(node) != me;
      if (chosen.empty() || (other && short_name(chosen_node) == me)) {
        chosen = source;
        chosen_node = node;
      }
    }
    if (chosen.empty())
      throw error(errc::backend_unavailable,
                  "backend=slurm: no route from this host to the cluster's nodes; set the config key 'master_address' "
                  "(FIBER_MASTER_ADDRESS) to an address of this machine the nodes can reach");
    logf(log_level::debug, "slurm: the master listens on ", chosen, " (its route to node ", chosen_node, ")");
    bind_host_ = advertise_host_ = chosen;
  }

  fiber::config cfg_;
  std::string master_;
  std::vector<node_room> rooms_;
  std::string where_;
  bool steps_ = false;
  std::unique_ptr<slurm::step_jobs> steps_jobs_;
  std::unique_ptr<slurm::batch_jobs> batch_;
  std::optional<secret_store> secrets_;  // made at the first child
};

}  // namespace

std::unique_ptr<backend> make_slurm_backend(asio::io_context& io, const fiber::config& cfg, const std::string& job_id) {
  return std::make_unique<slurm_backend>(io, cfg, job_id);
}

}  // namespace fiber::detail
