// A durable run's journal in its top master: where it lies (journal_dir/RUN_ID.journal), the run's
// id (made and printed when config run_id is unset), what the master before this one wrote there
// (read once, when the first pool asks), and the timer that makes appends durable at most every
// journal_sync_ms, so that a result costs an append and not a disk wait: the timer is the loop's,
// the writes and their fdatasync the journal writer's thread's, so the disk never holds the loop.
// Who watches is told, on the loop, how far the journal is durable after each sync (a pool's
// workers then let go of what they held for it). Pools take
// their numbers here in the order the program makes them: the same program run again numbers
// them the same. A run that is not durable, and every process below the top master, has none.
//
// Kept by the runtime's service registry (it lives as long as the runtime and hears of its
// shutdown, when what is buffered is made durable); no peer talks to it.
#pragma once
#include <asio/steady_timer.hpp>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <utility>
#include <vector>
#include <memory>
#include <string>

#include "core/run_journal.hpp"
#include "primitives/durable/master_notice.hpp"
#include "primitives/pool/map_journal.hpp"
#include "runtime/services/service_registry.hpp"

namespace fiber {
struct config;
}

namespace fiber::detail {
class runtime;

/// Where a durable run's journal lies: journal_dir, else $XDG_STATE_HOME/fiber/journals, else
/// ~/.local/state/fiber/journals; the file is RUN_ID.journal.
std::filesystem::path journal_folder(const fiber::config& cfg);
/// A fresh run id: the program's name, the UTC time, and 32 random bits ("es-20261129-061500-3fa2c1d0").
std::string new_run_id();

class durable_run final : public service {
 public:
  /// An id no channel takes (channel ids count up from 1 under a 32-bit prefix).
  static constexpr std::uint64_t service_id = ~std::uint64_t{0};

  /// The journal of `rt`'s run, opened on first use; null when the run is not durable or `rt` is
  /// not its top master. Throws fiber::error(config_error / journal_failed) when the journal
  /// cannot be opened. On the loop thread.
  static durable_run* of(runtime& rt);

  explicit durable_run(runtime& rt);
  ~durable_run() override;

  const std::string& run_id() const noexcept { return run_id_; }
  const std::filesystem::path& path() const noexcept { return path_; }
  /// Whether the journal held records when this master started: the run is taken up again.
  bool resumed() const noexcept { return resumed_; }

  /// The next pool's number (from 1).
  std::uint32_t next_pool() noexcept { return ++pools_; }
  map_journal& maps() noexcept { return maps_; }
  /// Something was appended: it is made durable within journal_sync_ms.
  void appended();
  /// `f` is told, on the loop, the offset up to which the journal is durable after each sync
  /// the timer asks for, as long as `alive` is.
  void watch(std::function<void(std::uint64_t)> f, std::weak_ptr<const void> alive);
  /// Makes what is buffered durable now, on this thread (a failure is logged, and tried again at
  /// the next).
  void sync() noexcept;

  void on_message(const std::string&, const header&, multipart&&) override {}
  bool serves_children() const noexcept override { return false; }
  void on_shutdown() noexcept override;

 private:
  std::string run_id_;
  std::filesystem::path path_;
  journal_contents past_;
  journal_writer writer_;
  map_journal maps_;
  bool resumed_ = false;
  std::uint32_t pools_ = 0;
  asio::steady_timer timer_;
  std::chrono::milliseconds every_;
  bool armed_ = false;
  bool failing_ = false;  // the last sync failed (said once until one succeeds)
  /// The timer's sync: how far the journal is durable now, or why it is not.
  void synced(std::uint64_t upto, const std::exception_ptr& failed);
  std::vector<std::pair<std::function<void(std::uint64_t)>, std::weak_ptr<const void>>> watchers_;  // on the loop
  runtime& rt_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // what the writer's thread posts runs only while this lives
  std::unique_ptr<master_notice> notice_;  // the master's own notice of its end: the journal synced first
};

}  // namespace fiber::detail
