#include "backend/local/local_resources.hpp"

#include <dlfcn.h>
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <sstream>

#include "backend/command.hpp"
#include "core/worker_env.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {

namespace {
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// NVML, loaded at run time so that fiber neither links nor needs the driver.
std::optional<unsigned> nvml_device_count() {
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return std::nullopt;
  using init_fn = int (*)();
  using count_fn = int (*)(unsigned*);
  auto init = reinterpret_cast<init_fn>(::dlsym(lib, "nvmlInit_v2"));
  auto count = reinterpret_cast<count_fn>(::dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto shutdown = reinterpret_cast<init_fn>(::dlsym(lib, "nvmlShutdown"));
  std::optional<unsigned> n;
  if (init && count && shutdown && init() == 0) {
    unsigned c = 0;
    if (count(&c) == 0) n = c;
    shutdown();
  }
  ::dlclose(lib);
  return n;
}

// `nvidia-smi -L` prints one "GPU <i>: <name> (UUID: ...)" line per device.
std::optional<unsigned> nvidia_smi_device_count() {
  auto r = run_command({"nvidia-smi", "-L"}, {}, std::chrono::seconds(10));
  if (!r.ok()) return std::nullopt;
  unsigned n = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("GPU ", 0) == 0) ++n;
  return n;
}

}  // namespace

gpu_inventory find_gpus(const std::string& value) {
  gpu_inventory inv;
  if (value == "none") {
    inv.source = "config gpus=none";
    return inv;
  }
  if (value != "auto") {
    inv.ids = split_list(value);
    inv.source = "config gpus=" + value;
    return inv;
  }
  std::optional<unsigned> n = nvml_device_count();
  inv.source = "NVML";
  if (!n) {
    n = nvidia_smi_device_count();
    inv.source = "nvidia-smi";
  }
  if (!n) {
    inv.source = "no NVIDIA driver found (neither libnvidia-ml.so.1 nor nvidia-smi)";
    return inv;
  }
  for (unsigned i = 0; i < *n; ++i) inv.ids.push_back(std::to_string(i));
  return inv;
}

gpu_inventory gpus_to_hand_out(const std::string& config_value) {
  if (!std::getenv(env_token)) return find_gpus(config_value);
  const char* given = std::getenv("CUDA_VISIBLE_DEVICES");
  gpu_inventory inv;
  inv.ids = split_list(given ? given : "");
  inv.source = std::string("the GPUs its parent gave this process, CUDA_VISIBLE_DEVICES=") + (given ? given : "");
  return inv;
}

local_resources::local_resources(find_gpus_fn find_gpus, std::vector<int> cpus)
    : find_gpus_(std::move(find_gpus)), cpus_(std::move(cpus)), cpu_users_(cpus_.size(), 0) {}

local_resources::local_resources(gpu_inventory gpus, std::vector<int> cpus)
    : local_resources([gpus = std::move(gpus)] { return gpus; }, std::move(cpus)) {}

const gpu_inventory& local_resources::gpus() const {
  std::call_once(found_, [this] {
    inventory_ = find_gpus_();
    find_gpus_ = nullptr;
    gpu_taken_.assign(inventory_.ids.size(), false);
  });
  return inventory_;
}

void local_resources::check(const spawn_spec& spec) const {
  auto have = spec.gpu > 0 ? gpus().ids.size() : 0;
  if (spec.gpu > 0 && static_cast<std::size_t>(spec.gpu) > have)
    throw error(errc::unsatisfiable,
                spec.name + " asks for " + std::to_string(spec.gpu) + " GPU" + (spec.gpu == 1 ? "" : "s") +
                    " and this host has " + std::to_string(have) + " (" + inventory_.source +
                    "): ask for fewer (FIBER_META .gpu), or name the devices to use in the config key gpus");
  if (spec.cpu_declared && static_cast<std::size_t>(spec.cpu) > cpus_.size())
    throw error(errc::unsatisfiable, spec.name + " asks for " + std::to_string(spec.cpu) + " CPUs and this process may run on " +
                                        std::to_string(cpus_.size()) + ": ask for fewer (FIBER_META .cpu)");
}

std::optional<local_grant> local_resources::try_take(const spawn_spec& spec) {
  local_grant g;
  if (spec.gpu > 0) {
    gpus();
    for (std::size_t i = 0; i < gpu_taken_.size() && g.gpus.size() < static_cast<std::size_t>(spec.gpu); ++i)
      if (!gpu_taken_[i]) g.gpus.push_back(inventory_.ids[i]);
    if (g.gpus.size() < static_cast<std::size_t>(spec.gpu)) return std::nullopt;
    for (auto& id : g.gpus) gpu_taken_[std::find(inventory_.ids.begin(), inventory_.ids.end(), id) - inventory_.ids.begin()] = true;
  }
  if (spec.cpu_declared && spec.cpu > 0 && !cpus_.empty()) {
    // The least used CPUs, lowest first among equals: children spread over the host.
    std::vector<std::size_t> order(cpus_.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return cpu_users_[a] < cpu_users_[b]; });
    order.resize(std::min<std::size_t>(order.size(), static_cast<std::size_t>(spec.cpu)));
    std::sort(order.begin(), order.end());
    for (auto i : order) {
      ++cpu_users_[i];
      g.cpus.push_back(cpus_[i]);
    }
  }
  return g;
}

void local_resources::give_back(const local_grant& g) {
  for (auto& id : g.gpus) {
    auto it = std::find(inventory_.ids.begin(), inventory_.ids.end(), id);
    if (it != inventory_.ids.end()) gpu_taken_[it - inventory_.ids.begin()] = false;
  }
  for (int cpu : g.cpus) {
    auto it = std::find(cpus_.begin(), cpus_.end(), cpu);
    if (it != cpus_.end() && cpu_users_[it - cpus_.begin()] > 0) --cpu_users_[it - cpus_.begin()];
  }
}

std::uint64_t local_resources::wait(std::function<bool()> start) {
  auto ticket = next_ticket_++;
  waiting_.emplace_back(ticket, std::move(start));
  return ticket;
}

void local_resources::cancel(std::uint64_t ticket) {
  std::erase_if(waiting_, [&](auto& w) { return w.first == ticket; });
}

void local_resources::start_waiting() {
  if (starting_) return;  // a start that fails gives back at once: no recursion
  starting_ = true;
  // In order: a large request first in line is not passed by smaller ones for ever.
  while (!waiting_.empty()) {
    auto start = waiting_.front().second;
    if (!start()) break;
    waiting_.pop_front();
  }
  starting_ = false;
}

std::string apply_limits(const std::vector<int>& cpus, std::uint64_t memory_mb) {
  std::string problems;
  if (!cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : cpus) CPU_SET(c, &set);
    if (::sched_setaffinity(0, sizeof set, &set) != 0) {
      std::string list;
      for (int c : cpus) list += (list.empty() ? "" : ",") + std::to_string(c);
      problems += "cannot pin to CPUs " + list + ": " + std::strerror(errno) + "; ";
    }
  }
  if (memory_mb > 0) {
    rlim_t bytes = static_cast<rlim_t>(memory_mb) << 20;
    rlimit limit{bytes, bytes};
    if (::setrlimit(RLIMIT_AS, &limit) != 0)
      problems += "cannot limit memory to " + std::to_string(memory_mb) + " MiB: " + std::strerror(errno) + "; ";
  }
  return problems;
}

std::string apply_local_limits() {
  std::vector<int> cpus;
  if (const char* list = std::getenv(env_cpus); list && *list)
    for (auto& c : split_list(list)) cpus.push_back(std::atoi(c.c_str()));
  return apply_limits(cpus, 0);  // memory: the master's memory_watch, on resident memory
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int i = 0; i < CPU_SETSIZE; ++i)
      if (CPU_ISSET(i, &set)) cpus.push_back(i);
  }
  return cpus;
}

}  // namespace fiber::detail
