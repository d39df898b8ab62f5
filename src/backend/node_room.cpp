#include "backend/node_room.hpp"

#include <cmath>

#include "fiber/error.hpp"

namespace fiber::detail {
namespace {

std::string cpus_text(double cpus) {
  if (std::floor(cpus) == cpus) return std::to_string(static_cast<std::int64_t>(cpus));
  auto milli = std::to_string(static_cast<std::int64_t>(std::llround(cpus * 1000)));
  return milli + "m";
}

bool fits(const node_room& n, const spawn_spec& s) {
  return s.cpu <= n.cpus + 1e-9 && s.memory_mb <= n.memory_mb && (n.gpus < 0 || s.gpu <= n.gpus);
}

}  // namespace

void check_rooms(const std::vector<node_room>& nodes, const spawn_spec& spec, const room_words& words) {
  for (auto& n : nodes)
    if (fits(n, spec)) return;
  std::string asked = "cpu " + std::to_string(spec.cpu);
  if (spec.memory_mb) asked += ", memory " + std::to_string(spec.memory_mb) + " MiB";
  if (spec.gpu) asked += ", " + std::to_string(spec.gpu) + " " + words.gpu;
  std::string have;
  constexpr std::size_t shown = 4;
  for (std::size_t i = 0; i < nodes.size() && i < shown; ++i) {
    auto& n = nodes[i];
    have += (i ? "; " : "") + n.name + " has cpu " + cpus_text(n.cpus) + ", memory " + std::to_string(n.memory_mb) +
            " MiB" + (n.gpus >= 0 ? ", " + std::to_string(n.gpus) + " " + words.gpu : "");
  }
  if (nodes.size() > shown) have += "; and " + std::to_string(nodes.size() - shown) + " more";
  if (nodes.empty()) have = "there are none";
  throw error(errc::unsatisfiable, (spec.name.empty() ? std::string("a child") : spec.name) + " asks for " + asked +
                                       " and no node of " + words.where + " has that much (" + have +
                                       "): ask for less (FIBER_META, pool_options::needs)" +
                                       (words.fix.empty() ? "" : ", or " + words.fix));
}

}  // namespace fiber::detail
