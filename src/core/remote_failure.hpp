// How a child reports a failure instead of a result, on every path that carries one (a process's
// end, a pool item, a manager call): an exception its code raised, or an error of fiber's own.
// One text form: kind, then type (or errc number), message and where, separated by NUL.
#pragma once
#include <exception>
#include <string>
#include <string_view>

#include "fiber/error.hpp"

namespace fiber::detail {

struct remote_failure {
  bool in_fiber = false;  // fiber's own error (`code`), not one the user's code raised
  int code = 0;
  std::string type;  // the raised exception's type
  std::string message;
  std::string where;  // the process it happened in (empty: the receiver knows)
  std::string item;   // the receiver's words for the pool item that raised it; never encoded

  /// What the current exception (in a catch block) says, as raised by the user's code.
  static remote_failure of_current_exception(std::string where = {});
  static remote_failure fiber_error(errc code, std::string message, std::string where = {});

  std::string encode() const;
  /// Never throws: text that is not a failure reads as fiber's protocol_error saying so.
  static remote_failure decode(std::string_view text);

  /// remote_error(type, message, where) for a raised exception; fiber::error(code) naming where
  /// for fiber's own.
  std::exception_ptr exception() const;
};

}  // namespace fiber::detail
