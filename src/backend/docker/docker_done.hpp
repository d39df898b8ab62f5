// How a Docker Engine API operation completes (docker_engine and its resources share it).
#pragma once
#include <string>
#include <system_error>

#include "fiber/detail/unique_function.hpp"

namespace fiber::detail {

/// How every Docker Engine API operation completes, on the io_context: an error, the result, and
/// `why` (what went wrong and what to do).
template <class T>
using docker_done = unique_function<void(std::error_code, T, std::string why)>;

}  // namespace fiber::detail
