// A child's hello, read and judged against what its master expects before it gets anything: the
// one-time word its master gave it (only the process started under that routing id knows it; one
// that links with a sibling's id, holding the job's keys, is refused before it gets the sibling's
// function and arguments), the protocol version, and the same build and registry as the master.
// No process, no socket: the bytes are the peer's, and nothing else is read from them first.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "fiber/error.hpp"

namespace fiber::detail {

struct child_hello {
  /// Empty when the child may be welcomed; else why not, in words for both ends, and the code
  /// its start fails with (binary_mismatch for another build, else protocol_error).
  std::string problem;
  errc code = errc::protocol_error;
  /// What it said of itself, once accepted.
  std::string host, memory_domain;
  std::optional<int> pid;
};

/// Reads `text` (child `name`'s hello), expecting the one-time word `nonce`.
child_hello read_child_hello(std::string_view text, std::string_view nonce, const std::string& name);

}  // namespace fiber::detail
