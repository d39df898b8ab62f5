// The nodes' allocatable resources, as the capacity check weighs them.
#pragma once
#include <boost/json/fwd.hpp>
#include <optional>
#include <string_view>
#include <vector>

#include "backend/node_room.hpp"

namespace fiber::detail::kube {

/// A Kubernetes resource quantity ("64", "3900m", "16Gi", "1e3", "129900Ki") as a number of units;
/// nullopt when it is not one.
std::optional<double> quantity(std::string_view text);

/// What each schedulable node of a NodeList can give one pod (status.allocatable): cordoned nodes
/// (spec.unschedulable) are left out; `gpu_resource` is the extended resource a GPU is.
std::vector<node_room> node_rooms(const boost::json::value& node_list, std::string_view gpu_resource);

}  // namespace fiber::detail::kube
