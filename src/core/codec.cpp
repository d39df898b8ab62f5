#include "fiber/codec.hpp"

#include <string>

namespace fiber::detail {
void throw_malformed(const char* what, std::size_t need, std::size_t have) {
  throw error(errc::malformed_message, std::string("malformed message: ") + what + " needs " + std::to_string(need) +
                                           " but the message has " + std::to_string(have) +
                                           " (truncated input, or sender and receiver disagree on the type)");
}
}  // namespace fiber::detail
