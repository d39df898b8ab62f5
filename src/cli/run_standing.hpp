// How `fiber ps` shows a run whose master its engine starts again after it died (a durable run's:
// a Slurm requeue, a Docker restart policy, a Kubernetes Job's next pod): "resuming" while the
// engine has yet to start it again, and how often it was started again beside what the engine
// says of it. A user reading ps sees that a run is being taken up, not that it failed or pends.
#pragma once
#include <string>

namespace fiber::cli {

/// The STATE column: "resuming" for a master that died (`restarts` > 0) and that its engine holds
/// back before starting it again (`waiting`: a requeued job pending, a container restarting, a
/// Job's next pod not yet running); else the engine's `state`.
std::string run_state(const std::string& state, int restarts, bool waiting);

/// `text` with "restart N" after it (", " between), or `text` alone when `restarts` is 0.
std::string with_restarts(std::string text, int restarts);

}  // namespace fiber::cli
