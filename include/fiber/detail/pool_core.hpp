// What fiber::pool's facade and templates ask of the pool behind them (its master side,
// src/primitives/pool/master.hpp). An interface, so that the public headers stay light: the
// pool's parts and their fields live in src/.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "fiber/detail/unique_function.hpp"
#include "fiber/pool_options.hpp"
#include "fiber/detail/export.hpp"

namespace fiber::detail {
class runtime;
class pool_sink;

class FIBER_API pool_core {
 public:
  /// A pool whose workers start once fiber's loop runs.
  static std::shared_ptr<pool_core> make(const std::shared_ptr<runtime>& rt, pool_options options);
  virtual ~pool_core() = default;

  // ---- from any thread

  virtual const std::shared_ptr<runtime>& rt() const = 0;
  /// Throws errc::closed once the pool was closed or terminated.
  virtual void check_open() const = 0;
  /// Runs `f` on fiber's loop with this core, waiting for it.
  virtual void on_loop(unique_function<void(pool_core&)> f) = 0;
  /// terminate() on the loop, without waiting (the pool's destructor).
  virtual void terminate_soon() = 0;

  // ---- on fiber's loop thread

  /// `chunksize` 0: chosen from `size_hint` (0: unknown) and the pool's size.
  virtual void submit(std::uint64_t function_id, std::size_t chunksize, std::size_t size_hint,
                      std::shared_ptr<pool_sink> sink, call_options options) = 0;
  /// Pulls more input (after imap's consumer made room).
  virtual void pump() = 0;
  /// No more work; workers leave once the submitted work is done.
  virtual void close() = 0;
  /// Kills the workers; work not finished fails with errc::closed.
  virtual void terminate() = 0;
  virtual bool open() const = 0;
  virtual void resize(int processes) = 0;
  /// Stops the work of `sink`'s call: its queued items are dropped, the workers running its
  /// items are killed and replaced, and every item not delivered fails with errc::cancelled.
  virtual void cancel(pool_sink& sink) = 0;
  /// `done` runs once every worker has left / every worker has started.
  virtual void when_joined(unique_function<void()> done) = 0;
  virtual void when_ready(unique_function<void()> done) = 0;
  virtual pool_stats stats() const = 0;
};

}  // namespace fiber::detail
