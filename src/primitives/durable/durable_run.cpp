#include "primitives/durable/durable_run.hpp"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>

#include <asio/post.hpp>

#include "core/flight_recorder.hpp"
#include "core/log.hpp"
#include "core/private_files.hpp"
#include "fiber/config.hpp"
#include "fiber/error.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {

namespace fs = std::filesystem;

fs::path journal_folder(const fiber::config& cfg) {
  if (!cfg.journal_dir.empty()) return cfg.journal_dir;
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state) return fs::path(state) / "fiber/journals";
  return home_folder(".local/state/fiber/journals", "journal_dir");
}

std::string new_run_id() {
  std::string program;
  for (char c : program_name().substr(0, 24))
    program += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ? c : '_';
  if (program.empty() || program.front() == '-') program = "run" + program;
  char when[32];
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(when, sizeof when, "%Y%m%d-%H%M%S", &utc);
  char tail[16];
  std::snprintf(tail, sizeof tail, "%08x", static_cast<unsigned>(std::random_device{}()));
  return program + "-" + when + "-" + tail;
}

durable_run* durable_run::of(runtime& rt) {
  if (!rt.cfg().durable || !rt.is_master()) return nullptr;
  return &rt.services().keep<durable_run>(service_id, [&] { return std::make_shared<durable_run>(rt); });
}

durable_run::durable_run(runtime& rt)
    : run_id_(rt.cfg().run_id.empty() ? new_run_id() : rt.cfg().run_id),
      path_(journal_folder(rt.cfg()) / (run_id_ + ".journal")),
      past_(read_journal(path_)),
      writer_(path_, rt.cfg().journal_max_bytes),
      maps_(past_, writer_),
      resumed_(!past_.records.empty()),
      timer_(rt.io()),
      every_(rt.cfg().journal_sync_ms),
      rt_(rt) {
  if (past_.torn)
    logf(log_level::warn, "the journal ", path_.string(), " ended in a torn record (its master died writing it): ",
         "taken up to its last whole record");
  if (resumed_)
    std::fprintf(stderr, "fiber: durable run %s taken up again from its journal %s\n", run_id_.c_str(), path_.c_str());
  else
    std::fprintf(stderr,
                 "fiber: durable run %s (journal %s): if its master dies, run the program again with FIBER_RUN_ID=%s "
                 "to take up where it stopped\n",
                 run_id_.c_str(), path_.c_str(), run_id_.c_str());
  past_ = {};  // what the maps need of it is in maps_
  notice_ = std::make_unique<master_notice>(rt.io(), [this] { sync(); }, run_id_);
}

durable_run::~durable_run() {
  alive_.reset();  // what the writer's thread posted does nothing now
  sync();
}

void durable_run::appended() {
  if (armed_) return;
  armed_ = true;
  timer_.expires_after(every_);
  timer_.async_wait([this](const std::error_code& ec) {
    if (ec) return;
    armed_ = false;
    writer_.sync_soon([this, alive = std::weak_ptr<bool>(alive_)](std::uint64_t upto, std::exception_ptr failed) {
      if (alive.expired()) return;
      asio::post(rt_.io(), [this, alive, upto, failed] {
        if (alive.lock()) synced(upto, failed);
      });
    });
  });
}

void durable_run::synced(std::uint64_t upto, const std::exception_ptr& failed) {
  if (failed) {
    try {
      std::rethrow_exception(failed);
    } catch (const std::exception& e) {
      if (!failing_) logf(log_level::error, "durable run ", run_id_, ": ", e.what(), " (tried again as results come)");
    }
    failing_ = true;
    return;
  }
  failing_ = false;
  std::erase_if(watchers_, [](const auto& w) { return w.second.expired(); });
  for (auto& [f, alive] : decltype(watchers_)(watchers_))
    if (!alive.expired()) f(upto);
}

void durable_run::watch(std::function<void(std::uint64_t)> f, std::weak_ptr<const void> alive) {
  watchers_.emplace_back(std::move(f), std::move(alive));
}

void durable_run::sync() noexcept {
  try {
    writer_.sync();
    failing_ = false;
  } catch (const std::exception& e) {
    if (!failing_) logf(log_level::error, "durable run ", run_id_, ": ", e.what(), " (tried again as results come)");
    failing_ = true;
  }
}

void durable_run::on_shutdown() noexcept {
  notice_.reset();  // the program's signals are its own again
  timer_.cancel();
  armed_ = false;
  sync();
}

}  // namespace fiber::detail
