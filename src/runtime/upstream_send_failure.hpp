// What a child says when a message to its master cannot be sent. A master that is gone (killed,
// or ended first) makes every later send fail the same way, once per result of every worker:
// that is said once, at INFO, as what it is, and the worker ends when its watch on the master
// fires. Any other failure is an error each time.
#pragma once
#include <string>
#include <system_error>
#include <utility>

#include "core/log.hpp"

namespace fiber::detail {

class upstream_send_failure {
 public:
  /// True when `ec` means the master's end of the connection is gone.
  static bool master_gone(std::error_code ec) noexcept;
  /// What to log for `ec` (level and text), or nothing: an empty text.
  std::pair<log_level, std::string> report(std::error_code ec);

 private:
  bool said_gone_ = false;
};

}  // namespace fiber::detail
