// How the `fiber` command names runs and their owners, on every backend.
#pragma once
#include <cstdint>
#include <string>

namespace fiber::cli {

/// The user running the command (runs are listed per user).
std::string user_name();
/// A run's default name: the program's file name, cleaned to letters, digits and '-', and six
/// random hex digits.
std::string default_run_name(const std::string& program);
/// fiber::error(config_error) unless `name` is usable as a run's name everywhere (a container
/// name, a host name, a Slurm job name): up to 63 letters, digits and '-', starting with a letter
/// or digit.
/// How long ago `epoch_seconds` was, as ps shows it: "42s", "5m", "3h", "2d".
std::string age_since(std::int64_t epoch_seconds);

void check_run_name(const std::string& name);
/// `text` cleaned to lower-case letters, digits and single '-' (at most 40), "fiber" if nothing is left.
std::string sanitized_name(const std::string& text);

}  // namespace fiber::cli
