// A container's output and its end, followed through the engine's restarts of it. The engine
// ends a log stream and a wait at each exit, also one it will start the container again after
// (a durable master's restart policy): following one life would print the first life's output
// and its exit code and stop, while the run goes on. Each new life's stream replays the output
// from the start; what was printed already is skipped, stream by stream.
#pragma once
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace fiber::detail {
class blocking_engine;
}

namespace fiber::cli {

class container_follow {
 public:
  /// `out(stream, bytes)` gets the output, stream 1 (stdout) or 2 (stderr).
  using sink = std::function<void(int, std::string_view)>;

  container_follow(detail::blocking_engine& engine, std::string id, sink out);

  /// Runs the engine's io until the container has ended for good (exited with no restart due, or
  /// removed: then 0 unless its exit was seen); returns its last exit code, or nullopt once `stop`
  /// holds (a handler on the engine's io sets it: Ctrl-C detaches). Throws
  /// fiber::error(backend_unavailable) when the engine fails.
  std::optional<int> run(const bool& stop);

 private:
  struct state;
  struct life_end;
  /// One life: its output (what is new of it) and its exit code; nullopt when stopped.
  std::optional<life_end> follow_life(const bool& stop);

  detail::blocking_engine& engine_;
  std::string id_;
  sink out_;
  std::size_t printed_[3] = {0, 0, 0};  // per stream, across lives
};

}  // namespace fiber::cli
