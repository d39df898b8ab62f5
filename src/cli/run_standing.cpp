#include "cli/run_standing.hpp"

namespace fiber::cli {

std::string run_state(const std::string& state, int restarts, bool waiting) {
  return restarts > 0 && waiting ? "resuming" : state;
}

std::string with_restarts(std::string text, int restarts) {
  if (restarts <= 0) return text;
  return text + (text.empty() ? "" : ", ") + "restart " + std::to_string(restarts);
}

}  // namespace fiber::cli
