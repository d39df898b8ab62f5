#include "core/remote_failure.hpp"

#include <charconv>

#include "core/demangle.hpp"

namespace fiber::detail {

remote_failure remote_failure::of_current_exception(std::string where) {
  remote_failure f;
  f.where = std::move(where);
  try {
    throw;
  } catch (const std::exception& e) {
    f.type = type_name_of(e);
    f.message = e.what();
  } catch (...) {
    f.type = "unknown";
    f.message = "an exception not derived from std::exception";
  }
  return f;
}

remote_failure remote_failure::fiber_error(errc code, std::string message, std::string where) {
  remote_failure f;
  f.in_fiber = true;
  f.code = static_cast<int>(code);
  f.message = std::move(message);
  f.where = std::move(where);
  return f;
}

std::string remote_failure::encode() const {
  std::string out(1, in_fiber ? 'f' : 'r');
  out += '\0';
  out += in_fiber ? std::to_string(code) : type;
  out += '\0';
  out += message;
  out += '\0';
  out += where;
  return out;
}

remote_failure remote_failure::decode(std::string_view text) {
  std::string_view fields[4];
  std::size_t n = 0;
  for (std::size_t pos = 0; n < 4;) {
    auto nul = n < 3 ? text.find('\0', pos) : std::string_view::npos;  // where may hold anything
    fields[n++] = text.substr(pos, nul == std::string_view::npos ? std::string_view::npos : nul - pos);
    if (nul == std::string_view::npos) break;
    pos = nul + 1;
  }
  remote_failure f;
  if (n == 4 && fields[0] == "r") {
    f.type = fields[1];
  } else if (n == 4 && fields[0] == "f" &&
             std::from_chars(fields[1].data(), fields[1].data() + fields[1].size(), f.code).ptr ==
                 fields[1].data() + fields[1].size() &&
             !fields[1].empty()) {
    f.in_fiber = true;
  } else {
    return fiber_error(errc::protocol_error, "a failure report in an unreadable form (" +
                                                 std::to_string(text.size()) + " bytes)");
  }
  f.message = fields[2];
  f.where = fields[3];
  return f;
}

std::exception_ptr remote_failure::exception() const {
  if (!in_fiber) return std::make_exception_ptr(remote_error(type, message, where, item));
  return std::make_exception_ptr(
      error(static_cast<errc>(code), where.empty() ? message : message + " (in " + where + ")"));
}

}  // namespace fiber::detail
