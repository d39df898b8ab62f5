#include "backend/backend.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "fiber/config.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {
std::string pidfd_open_failure(int err) {
  std::string what = std::string("pidfd_open failed: ") + std::strerror(err);
  if (err == ENOSYS) return what + " (fiber needs Linux 5.3 or newer)";
  if (err == EMFILE || err == ENFILE)
    return what + ": this process is out of open files; raise its limit (ulimit -n, or setrlimit(RLIMIT_NOFILE) in main)";
  return what;
}

std::string this_host() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

std::string master_host() {
  const char* run = std::getenv("FIBER_RUN_NAME");
  return run && *run ? std::string(run) : this_host();
}

std::string master_mark() { return master_host() + ":" + std::to_string(::getpid()); }

bool workers_wait_for_next_master(const fiber::config& cfg) { return cfg.durable && cfg.reattach_grace_ms > 0; }

std::unique_ptr<job> backend::adopt(const std::string& handle) {
  throw error(errc::unsatisfiable, "the " + name() + " backend cannot take up " + handle +
                                       ", a worker of an earlier master of the run");
}

std::unique_ptr<backend> make_backend(asio::io_context& io, const fiber::config& cfg, const std::string& job_id) {
  if (cfg.backend == "local") return make_local_backend(io, cfg);
  if (cfg.backend == "docker") return make_docker_backend(io, cfg, job_id);
  if (cfg.backend == "slurm") return make_slurm_backend(io, cfg, job_id);
  if (cfg.backend == "kubernetes") return make_kubernetes_backend(io, cfg, job_id);
  throw error(errc::backend_unavailable, "backend '" + cfg.backend + "' is unknown; use backend=local, docker, kubernetes or slurm");
}
}  // namespace fiber::detail
