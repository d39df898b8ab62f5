// A token handed to a process as a file (a Kubernetes Secret mounted in its pod), named by an
// environment variable: the variable, which a pod's spec shows to readers of the namespace, holds
// only the path.
#pragma once
#include <string>

namespace fiber::detail {

/// The first line of the file environment variable `variable` names, without its line end; empty
/// when the variable is unset or the file cannot be read.
std::string token_in_file(const char* variable);

}  // namespace fiber::detail
