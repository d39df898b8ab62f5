// The pool's workers as its shared-object courier sees them (courier_directory): found by
// routing id in the worker set, with their memory domains, and sent to through the runtime's
// master side. On fiber's loop thread.
#pragma once
#include <optional>
#include <string>
#include <system_error>

#include "primitives/pool/shared_courier.hpp"
#include "primitives/pool/worker_set.hpp"

namespace fiber::detail {
class runtime;

class worker_directory final : public courier_directory {
 public:
  worker_directory(runtime& rt, worker_set& workers) : rt_(rt), workers_(workers) {}
  /// What the courier knows of `w`.
  static courier_worker describe(const pool_worker& w);

  std::optional<courier_worker> find(const std::string& rid) const override;
  bool has_mates(const courier_worker& w) const override;
  std::error_code send(const std::string& rid, multipart&& m) override;

 private:
  runtime& rt_;
  worker_set& workers_;
};

}  // namespace fiber::detail
