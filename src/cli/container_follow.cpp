#include "cli/container_follow.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <memory>

#include "backend/docker/blocking_engine.hpp"
#include "backend/docker/docker_engine.hpp"
#include "fiber/error.hpp"
#include "transport/run_until.hpp"

namespace fiber::cli {

/// What the engine's callbacks write: shared with them, since a detached follow returns while its
/// stream and its wait are still open.
struct container_follow::state {
  std::size_t seen[3] = {0, 0, 0};
  bool logs_done = false;
  std::optional<int> code;
  std::string failure;
};

struct container_follow::life_end {
  std::int64_t restarts = 0;  // the engine's RestartCount when the life ended
  bool ended_for_good = false;
  bool removed = false;  // the container is gone: nothing more to read
  int code = 0;
};

container_follow::container_follow(detail::blocking_engine& engine, std::string id, sink out)
    : engine_(engine), id_(std::move(id)), out_(std::move(out)) {}

std::optional<container_follow::life_end> container_follow::follow_life(const bool& stop) {
  auto s = std::make_shared<state>();
  auto& containers = engine_.engine().containers();
  containers.follow_logs(
      id_,
      [this, s](int stream, std::string_view bytes) {
        // Bytes [before, after) of this stream; those below printed_ were printed by a life before.
        auto before = s->seen[stream];
        s->seen[stream] += bytes.size();
        if (s->seen[stream] <= printed_[stream]) return;
        auto skip = printed_[stream] > before ? printed_[stream] - before : 0;
        out_(stream, bytes.substr(skip));
        printed_[stream] = s->seen[stream];
      },
      [s](std::error_code, bool, const std::string&) { s->logs_done = true; });
  containers.wait(id_, [s](std::error_code ec, int exit_code, const std::string& why) {
    if (ec) s->failure = why.empty() ? ec.message() : why;
    else s->code = exit_code;
  });
  detail::run_until(engine_.io(), [&] { return stop || ((s->code || !s->failure.empty()) && s->logs_done); });
  if (stop) return std::nullopt;
  life_end end;
  // A container removed as it ended (a worker's, by its master) has ended for good.
  auto removed = [&](const std::string& why) {
    if (!detail::benign_remove_error(why)) return false;
    end.ended_for_good = end.removed = true;
    end.code = s->code.value_or(0);
    return true;
  };
  if (!s->failure.empty()) {
    if (removed(s->failure)) return end;
    throw error(errc::backend_unavailable, "waiting for container " + id_.substr(0, 12) + ": " + s->failure);
  }
  std::string text;
  try {
    text = engine_.run<std::string>([&](detail::docker_engine& e, auto done) { e.containers().inspect(id_, std::move(done)); });
  } catch (const error& e) {
    if (removed(e.what())) return end;
    throw;
  }
  auto inspected = boost::json::parse(text);
  auto& st = inspected.at("State").as_object();
  end.restarts = inspected.as_object().if_contains("RestartCount") ? inspected.at("RestartCount").to_number<std::int64_t>() : 0;
  // Restarting, or already running again: the engine starts it again; exited (or dead): it ended.
  end.ended_for_good = !st.at("Running").as_bool() && !st.at("Restarting").as_bool();
  end.code = end.ended_for_good ? static_cast<int>(st.at("ExitCode").to_number<std::int64_t>()) : *s->code;
  return end;
}

std::optional<int> container_follow::run(const bool& stop) {
  std::int64_t restarts = -1;
  for (;;) {
    auto end = follow_life(stop);
    if (!end) return std::nullopt;
    if (end->removed) return end->code;
    // A life that began and ended between this pass's end and its inspection left output this
    // pass did not see: one more pass (the stream of an ended container returns at once).
    if (end->ended_for_good && end->restarts == restarts) return end->code;
    restarts = end->ended_for_good ? end->restarts : -1;
  }
}

}  // namespace fiber::cli
