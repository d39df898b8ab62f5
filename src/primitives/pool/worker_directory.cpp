#include "primitives/pool/worker_directory.hpp"

#include "primitives/child_process.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {

courier_worker worker_directory::describe(const pool_worker& w) {
  return {.rid = w.rid, .name = w.proc->name(), .domain = w.proc->where().memory_domain, .connected = w.connected};
}

std::optional<courier_worker> worker_directory::find(const std::string& rid) const {
  auto* w = workers_.find(rid);
  if (!w) return std::nullopt;
  return describe(*w);
}

bool worker_directory::has_mates(const courier_worker& w) const {
  bool mates = false;
  workers_.for_each([&](const pool_worker& o) {
    mates = mates || (o.rid != w.rid && !o.leaving && o.proc->where().memory_domain == w.domain);
  });
  return mates;
}

std::error_code worker_directory::send(const std::string& rid, multipart&& m) {
  return rt_.master().try_send_to_child(rid, std::move(m));
}

}  // namespace fiber::detail
