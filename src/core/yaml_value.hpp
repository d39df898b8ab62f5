// A YAML document read as a Boost.JSON value, through libyaml (a C library, so fiber links no
// C++ library built against one standard library: the same build works with libstdc++ and libc++).
#pragma once
#include <boost/json/value.hpp>
#include <string>
#include <string_view>

namespace fiber::detail {

/// The first document of `text` as a value: mappings become objects (a later duplicate key wins),
/// sequences arrays, and every scalar a string, as written (YAML 1.1's `yes` or `0x1F` are not
/// reinterpreted; the caller knows what each field means). An empty text is null.
/// Throws fiber::error(config_error) naming `what`, the line and the column of a syntax error, and
/// refuses a document whose aliases would expand past `max_nodes` nodes or nest past `max_depth`
/// (an alias bomb, a self-referencing alias).
boost::json::value parse_yaml(std::string_view text, const std::string& what, std::size_t max_nodes = 1'000'000,
                              std::size_t max_depth = 256);

}  // namespace fiber::detail
