#include "cli/run_options.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "core/volume.hpp"
#include "fiber/error.hpp"
#include "primitives/durable/durable_run.hpp"

namespace fiber::cli {

std::int64_t parse_size(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  std::string unit = end ? end : "";
  for (auto& ch : unit) ch = static_cast<char>(std::tolower(ch));
  if (unit.ends_with("ib")) unit.resize(unit.size() - 2);
  else if (unit.ends_with("i") || unit.ends_with("b")) unit.pop_back();
  double scale = unit.empty() ? 1 : unit == "k" ? 1024.0 : unit == "m" ? 1024.0 * 1024 : unit == "g" ? 1024.0 * 1024 * 1024 : -1;
  if (end == text.c_str() || scale < 0 || !(v > 0) || !std::isfinite(v))
    throw error(errc::config_error, flag + " " + text + " is not a size: a number with K, M or G (512M, 2G)");
  return static_cast<std::int64_t>(v * scale);
}

std::optional<claim_path> parse_claim_path(const std::string& text) {
  auto colon = text.find(':');
  if (colon == std::string::npos || colon == 0 || text[0] == '.' || text[0] == '/') return std::nullopt;
  for (std::size_t i = 0; i < colon; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (!std::isalnum(c) && c != '_' && c != '.' && c != '-') return std::nullopt;
  }
  return claim_path{text.substr(0, colon), text.substr(colon + 1)};
}

void apply_durable(run_options& o, const std::string& backend) {
  if (o.restarts > 0 && !o.durable)
    throw error(errc::config_error, "--restarts starts a master again to take its run up from the journal: add --durable");
  if (o.restarts > 0 && backend == "slurm")
    throw error(errc::config_error, "--restarts has no use on Slurm: a durable master's job is requeue-able, and "
                                    "Slurm runs it again when it requeues it (scontrol requeue, a failed node)");
  if (!o.durable) return;
  // A value given in --env stays; one in this command's environment is passed on, since a
  // container, a pod or a requeued job does not see this shell's.
  auto given = [&](const std::string& key) {
    for (auto& kv : o.env)
      if (kv.starts_with(key + "=")) return true;
    if (const char* here = std::getenv(key.c_str()); here && *here) {
      o.env.push_back(key + "=" + here);
      return true;
    }
    return false;
  };
  o.env.insert(o.env.begin(), "FIBER_DURABLE=true");
  if (!given("FIBER_RUN_ID")) o.env.push_back("FIBER_RUN_ID=" + detail::new_run_id());
  if ((backend == "docker" || backend == "kubernetes") && !given("FIBER_JOURNAL_DIR")) {
    // A container's or a pod's own files go with it: the journal is kept on the run's volume.
    for (auto& v : o.volumes)
      for (auto& mounted : detail::parse_volumes(v))
        if (!mounted.read_only) {
          o.env.push_back("FIBER_JOURNAL_DIR=" + mounted.target + "/.fiber/journals");
          return;
        }
    throw error(errc::config_error, "--durable on " + backend + ": the journal must outlive the master's " +
                                        (backend == "docker" ? "container" : "pod") +
                                        ": give a volume it is kept on (-v NAME[:PATH]), or --env "
                                        "FIBER_JOURNAL_DIR=<a path on one>");
  }
}

}  // namespace fiber::cli
