// fiber::pool: the non-template members, each a call into the master's side (pool/master.hpp).
#include <algorithm>

#include "core/log.hpp"
#include "fiber/pool.hpp"
#include "primitives/pool/master.hpp"

namespace fiber {

pool::pool(context& ctx, pool_options options)
    : rt_(ctx.runtime()), core_(detail::make_pool_core(rt_, std::move(options))) {}

pool::~pool() {
  if (!core_ || !owner_) return;
  try {
    detail::pool_terminate_soon(core_);
  } catch (const std::exception& e) {
    detail::logf(log_level::error, "stopping a pool: ", e.what());
  }
}

void pool::close() {
  detail::pool_on_loop(core_, [](detail::pool_core& c) { detail::pool_close(c); });
}

namespace {
using arm_fn = void (*)(detail::pool_core&, detail::unique_function<void()>);

/// An op that completes when `arm` calls back (on fiber's loop).
op<void> when(const std::shared_ptr<detail::pool_core>& core, arm_fn arm) {
  return detail::deferred_op<void>(detail::pool_runtime(*core), [core, arm] {
    auto c = std::make_shared<detail::completion<std::monostate>>();
    arm(*core, [c] { c->set_value({}); });
    return c;
  });
}
}  // namespace

op<void> pool::join() {
  return when(core_, [](detail::pool_core& c, detail::unique_function<void()> done) {
    if (detail::pool_is_open(c)) throw error(errc::not_started, "pool::join() before close() or terminate(): close the pool first");
    detail::pool_when_joined(c, std::move(done));
  });
}

op<void> pool::terminate() {
  return when(core_, [](detail::pool_core& c, detail::unique_function<void()> done) {
    detail::pool_terminate(c);
    detail::pool_when_joined(c, std::move(done));
  });
}

op<void> pool::ready() {
  return when(core_, [](detail::pool_core& c, detail::unique_function<void()> done) { detail::pool_when_ready(c, std::move(done)); });
}

void pool::resize(int processes) {
  detail::pool_on_loop(core_, [processes](detail::pool_core& c) { detail::pool_resize(c, processes); });
}

pool_stats pool::stats() const {
  pool_stats s;
  detail::pool_on_loop(core_, [&](detail::pool_core& c) { s = detail::pool_stats_of(c); });
  return s;
}

std::size_t pool::stream_bound(std::size_t chunksize) const {
  // Enough finished results to keep every worker busy while the caller catches up.
  std::size_t workers = 0;
  detail::pool_on_loop(core_, [&](detail::pool_core& c) { workers = detail::pool_stats_of(c).workers; });
  return std::max<std::size_t>(64, 8 * std::max<std::size_t>(1, workers) * std::max<std::size_t>(1, chunksize));
}

}  // namespace fiber
