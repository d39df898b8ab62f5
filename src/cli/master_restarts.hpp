// `fiber run --durable --restarts N` on this host: whether a master that ended starts again. A
// master that died by a signal (an OOM kill, a crash) is started again with the same run id, up
// to N times, and takes its run up from the journal; one that exited, or that was asked to stop
// (SIGINT, SIGTERM), is not.
#pragma once
#include <string>

namespace fiber::cli {

class master_restarts {
 public:
  explicit master_restarts(int allowed) : left_(allowed) {}
  /// Whether a master that ended with wait status `status` (waitpid's) starts again; when it
  /// does, `said` tells why, for stderr.
  bool again(int status, std::string& said);
  int left() const noexcept { return left_; }

 private:
  int left_;
};

}  // namespace fiber::cli
