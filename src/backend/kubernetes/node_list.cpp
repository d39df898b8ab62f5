#include "backend/kubernetes/node_list.hpp"

#include <boost/json.hpp>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

namespace fiber::detail::kube {

std::optional<double> quantity(std::string_view text) {
  // <number><suffix>: binary (Ki..Ei), decimal (n u m k M G T P E), or an exponent (e3, E-2).
  std::size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.' ||
                               (end == 0 && (text[end] == '+' || text[end] == '-'))))
    ++end;
  if (end == 0) return std::nullopt;
  double value = 0;
  try {
    std::size_t used = 0;
    value = std::stod(std::string(text.substr(0, end)), &used);
    if (used != end) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  auto suffix = text.substr(end);
  struct scale {
    std::string_view name;
    double factor;
  };
  static constexpr scale scales[] = {{"", 1},        {"n", 1e-9},         {"u", 1e-6},         {"m", 1e-3},
                                     {"k", 1e3},     {"M", 1e6},          {"G", 1e9},          {"T", 1e12},
                                     {"P", 1e15},    {"E", 1e18},         {"Ki", 1024.0},      {"Mi", 1048576.0},
                                     {"Gi", 1073741824.0}, {"Ti", 1099511627776.0}, {"Pi", 1125899906842624.0},
                                     {"Ei", 1152921504606846976.0}};
  for (auto& s : scales)
    if (suffix == s.name) return value * s.factor;
  if (suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    int exponent = 0;
    auto* first = suffix.data() + 1;
    if (*first == '+') ++first;
    auto [p, ec] = std::from_chars(first, suffix.data() + suffix.size(), exponent);
    if (ec == std::errc() && p == suffix.data() + suffix.size()) return value * std::pow(10.0, exponent);
  }
  return std::nullopt;
}

std::vector<node_room> node_rooms(const boost::json::value& node_list, std::string_view gpu_resource) {
  std::vector<node_room> rooms;
  auto* list = node_list.if_object();
  auto* items = list ? list->if_contains("items") : nullptr;
  if (!items || !items->is_array()) return rooms;
  for (auto& item : items->as_array()) {
    auto* node = item.if_object();
    if (!node) continue;
    auto* spec = node->if_contains("spec");
    if (spec && spec->is_object())
      if (auto* u = spec->as_object().if_contains("unschedulable"); u && u->is_bool() && u->as_bool()) continue;
    node_room room;
    if (auto* meta = node->if_contains("metadata"); meta && meta->is_object())
      if (auto* name = meta->as_object().if_contains("name"); name && name->is_string()) room.name = name->as_string();
    auto* status = node->if_contains("status");
    auto* allocatable = status && status->is_object() ? status->as_object().if_contains("allocatable") : nullptr;
    if (!allocatable || !allocatable->is_object()) continue;
    auto amount = [&](std::string_view key) -> double {
      auto* v = allocatable->as_object().if_contains(key);
      if (!v || !v->is_string()) return 0;
      return quantity(v->as_string()).value_or(0);
    };
    room.cpus = amount("cpu");
    room.memory_mb = static_cast<std::int64_t>(amount("memory") / 1048576.0);
    room.gpus = static_cast<std::int64_t>(amount(gpu_resource));
    rooms.push_back(std::move(room));
  }
  return rooms;
}

}  // namespace fiber::detail::kube
