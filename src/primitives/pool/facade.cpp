// fiber::pool: the non-template members, each a call into the pool's core (fiber/detail/pool_core.hpp).
#include <algorithm>

#include "core/log.hpp"
#include "fiber/pool.hpp"

namespace fiber {

pool::pool(context& ctx, pool_options options)
    : rt_(ctx.runtime()), core_(detail::pool_core::make(rt_, std::move(options))) {}

pool::~pool() {
  if (!core_ || !owner_) return;
  try {
    core_->terminate_soon();
  } catch (const std::exception& e) {
    detail::logf(log_level::error, "stopping a pool: ", e.what());
  }
}

void pool::close() {
  core_->on_loop([](detail::pool_core& c) { c.close(); });
}

op<void> pool::join() {
  return detail::callback_op(rt_, [core = core_](const detail::done_callback& done) {
    if (core->open()) throw error(errc::not_started, "pool::join() before close() or terminate(): close the pool first");
    core->when_joined(done);
  });
}

op<void> pool::terminate() {
  return detail::callback_op(rt_, [core = core_](const detail::done_callback& done) {
    core->terminate();
    core->when_joined(done);
  });
}

op<void> pool::ready() {
  return detail::callback_op(rt_, [core = core_](const detail::done_callback& done) { core->when_ready(done); });
}

void pool::resize(int processes) {
  core_->on_loop([processes](detail::pool_core& c) { c.resize(processes); });
}

pool_stats pool::stats() const {
  pool_stats s;
  core_->on_loop([&](detail::pool_core& c) { s = c.stats(); });
  return s;
}

std::size_t pool::stream_bound(std::size_t chunksize) const {
  // Enough finished results to keep every worker busy while the caller catches up.
  auto workers = stats().workers;
  return std::max<std::size_t>(64, 8 * std::max<std::size_t>(1, workers) * std::max<std::size_t>(1, chunksize));
}

}  // namespace fiber
