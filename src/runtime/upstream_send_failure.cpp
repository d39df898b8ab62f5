#include "runtime/upstream_send_failure.hpp"

namespace fiber::detail {

bool upstream_send_failure::master_gone(std::error_code ec) noexcept {
  return ec == std::errc::broken_pipe || ec == std::errc::connection_reset || ec == std::errc::not_connected ||
         ec == std::errc::connection_aborted;
}

std::pair<log_level, std::string> upstream_send_failure::report(std::error_code ec) {
  if (!master_gone(ec)) return {log_level::error, "cannot send to the master: " + ec.message()};
  if (said_gone_) return {log_level::info, {}};
  said_gone_ = true;
  return {log_level::info, "the master is gone (" + ec.message() + "): nothing more reaches it"};
}

}  // namespace fiber::detail
