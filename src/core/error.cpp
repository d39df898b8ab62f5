#include "fiber/error.hpp"

#include <string>

namespace fiber {
namespace {
class category : public std::error_category {
 public:
  const char* name() const noexcept override { return "fiber"; }
  std::string message(int c) const override {
    switch (static_cast<errc>(c)) {
      case errc::not_registered: return "function or class not registered";
      case errc::binary_mismatch: return "worker runs a different binary than the master";
      case errc::protocol_error: return "protocol error";
      case errc::malformed_message: return "malformed message";
      case errc::message_too_large: return "message too large";
      case errc::config_error: return "configuration error";
      case errc::spawn_failed: return "could not start a child";
      case errc::worker_lost: return "worker lost";
      case errc::remote_error: return "exception in another process";
      case errc::timeout: return "timed out";
      case errc::not_started: return "process not started";
      case errc::already_started: return "process already started";
      case errc::closed: return "closed";
      case errc::wrong_direction: return "wrong direction for this pipe end";
      case errc::would_deadlock: return "blocking call on fiber's event-loop thread";
      case errc::backend_unavailable: return "backend unavailable";
      case errc::server_lost: return "manager server lost";
      case errc::member_lost: return "ring member lost";
      case errc::unsatisfiable: return "no node can satisfy the request";
      case errc::timed_out: return "a task ran longer than its time limit";
      case errc::cancelled: return "the operation was cancelled";
      case errc::shared_cache_full: return "the shared objects in use would exceed shared_cache_bytes";
      case errc::too_deep: return "the tree of processes would be deeper than max_depth";
      case errc::maker_gone:
        return "the process that made this queue or pipe has ended, and the queue or pipe with it (keep its maker "
               "running while others use it, or make it in the master)";
      case errc::journal_failed: return "the durable run's journal could not be written";
      case errc::memory_exceeded: return "a worker went past its memory limit and was stopped";
    }
    return "unknown fiber error";
  }
};
}  // namespace

const std::error_category& fiber_category() noexcept {
  static const category c;
  return c;
}

std::string error::reason() const {
  std::string said = what();
  if (auto tail = ": " + code().message(); said.ends_with(tail)) said.resize(said.size() - tail.size());
  return said;
}

}  // namespace fiber
