#include "core/message_limit.hpp"

#include "fiber/error.hpp"

namespace fiber::detail {

std::string message_limit_text(std::string_view what, std::size_t size, std::uint64_t limit,
                               std::string_view instead) {
  if (size <= limit) return {};
  return std::string(what) + " take " + std::to_string(size) + " bytes, more than max_message_bytes (" +
         std::to_string(limit) + "); raise it (config key max_message_bytes, FIBER_MAX_MESSAGE_BYTES) or " +
         std::string(instead);
}

void check_message_size(std::string_view what, std::size_t size, std::uint64_t limit, std::string_view instead) {
  if (auto text = message_limit_text(what, size, limit, instead); !text.empty())
    throw error(errc::message_too_large, text);
}

}  // namespace fiber::detail
