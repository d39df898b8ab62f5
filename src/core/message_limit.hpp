// The one check of a payload against max_message_bytes, made where the data enters (a process's
// arguments, queue and pipe messages, pool arguments and results, manager calls and results),
// and its one wording: what is too large, by how much, the key, and what to do instead.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace fiber::detail {

/// Empty when `size` bytes of `what` fit in `limit`; else the error's text.
std::string message_limit_text(std::string_view what, std::size_t size, std::uint64_t limit,
                               std::string_view instead);
/// Throws fiber::error(errc::message_too_large) with message_limit_text when over.
void check_message_size(std::string_view what, std::size_t size, std::uint64_t limit, std::string_view instead);

}  // namespace fiber::detail
