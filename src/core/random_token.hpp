// Tokens for who may call: 128 bits from the kernel's random source.
#pragma once
#include <string>

namespace fiber::detail {

/// 128 random bits from the kernel, as 32 hex digits: a page's token, a recording's taker's, a
/// child's one-time word.
std::string random_token();

}  // namespace fiber::detail
