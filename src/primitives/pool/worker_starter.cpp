#include "primitives/pool/worker_starter.hpp"

#include <algorithm>
#include <csignal>
#include <limits>
#include <tuple>
#include <vector>

#include "core/log.hpp"
#include "fiber/error.hpp"
#include "primitives/child_process.hpp"
#include "primitives/pool/wire.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {

namespace {
/// A worker killed from outside (SIGKILL, SIGTERM, SIGINT, SIGHUP) before its handshake says
/// nothing about the next one: it is replaced like any lost worker.
bool killed_from_outside(std::optional<int> exit_code) {
  return exit_code &&
         (*exit_code == -SIGKILL || *exit_code == -SIGTERM || *exit_code == -SIGINT || *exit_code == -SIGHUP);
}
}  // namespace

std::shared_ptr<child_process> worker_starter::make(const meta& needs,
                                                    unique_function<std::unique_ptr<job>(const spawn_spec&)> take) {
  encoded_call call;
  const auto& entry = require_registered(&pool_worker_main);
  call.function_id = entry.id;
  call.function_name = entry.name;
  std::uint64_t init_id = 0;
  std::vector<std::string> init_frames;
  if (options_.initializer) {
    auto& init = options_.initializer->call;
    init_id = init.function_id;
    init_frames.push_back(init.args.head());
    for (auto& b : init.args.blobs()) init_frames.emplace_back(reinterpret_cast<const char*>(b.data), b.size);
  }
  call.args.value(std::make_tuple(pool_id_, options_.prefetch + 1, options_.maxtasksperchild,
                                  static_cast<std::int64_t>(options_.report_interval.count()), init_id, init_frames));
  auto proc = child_process::make(rt_.shared_from_this(), std::move(call), needs, std::move(take));
  // The pool's number in this process (a child's ids carry its channel prefix in the high half).
  proc->set_name("PoolWorker-" + std::to_string(pool_id_ & 0xffffffffu) + "-" + std::to_string(++made_));
  proc->set_owned();
  return proc;
}

std::size_t worker_starter::limit() const {
  if (rt_.master().the_backend().name() != "local") return std::numeric_limits<std::size_t>::max();
  return static_cast<std::size_t>(std::max(16, 4 * cpu_count()));
}

worker_starter::verdict worker_starter::failed(bool same_needs, std::error_code ec, const std::string& what,
                                               std::optional<int> exit_code) {
  if (killed_from_outside(exit_code)) return verdict::ignore;  // its end starts its replacement
  // Started with other needs than new workers get now (raised since, or a raise refused since):
  // its failure says nothing about the next start.
  if (!same_needs) return verdict::ignore;
  // A worker that cannot start (binary mismatch, missing executable, an error before its
  // handshake) will not start next time either: fail the work at hand instead of trying
  // forever. A request no node can meet is not met by the next worker either: at once.
  bool hopeless = ec == make_error_code(errc::unsatisfiable);
  if (++failures_ < max_start_failures && !hopeless) {
    logf(log_level::warn, "a pool worker could not start (", failures_, " in a row): ", what);
    return verdict::try_next;
  }
  return verdict::give_up;
}

bool worker_starter::try_again() noexcept {
  if (!stopped_) return false;
  stopped_ = false;
  failures_ = 0;
  return true;
}

}  // namespace fiber::detail
