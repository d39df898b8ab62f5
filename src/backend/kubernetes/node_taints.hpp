// What keeps a pod off the nodes when the scheduler says "node(s) had untolerated taint(s)" (it
// names no taint): the nodes' taints that the pod does not tolerate, and whether they are ones the
// cluster takes off by itself.
#pragma once
#include <boost/json/fwd.hpp>
#include <string>
#include <string_view>

#include "backend/kubernetes/kube_api.hpp"

namespace fiber::detail::kube {

/// A taint that the node lifecycle puts on a node and takes off by itself once the condition has
/// passed: not-ready and unreachable (a control plane that was away, a kubelet that missed its
/// heartbeat), memory-, disk- and pid-pressure, network-unavailable, and a new node the cloud
/// provider has not initialized yet. A pod kept off by these alone waits; any other taint (a
/// cordon, an admin's own) stays until someone acts.
bool passing_taint(std::string_view key);

/// Whether the scheduler's Unschedulable message gives taints as a reason, which it does without
/// naming them ("N node(s) had untolerated taint(s)").
bool refused_for_taints(std::string_view scheduler_message);

struct untolerated {
  std::string nodes;     ///< "k1 (node.kubernetes.io/unreachable:NoSchedule), k2 (...)"; empty: no node has one now
  bool passing = true;   ///< every one of them is a passing_taint
};

/// The NoSchedule and NoExecute taints of a NodeList's nodes that `pod_spec`'s tolerations do not
/// tolerate (a Pod's spec, or null for none).
untolerated untolerated_taints(const boost::json::value& node_list, const boost::json::object* pod_spec);

/// What a start kept off by lasting taints fails with, after the scheduler's message: the nodes,
/// their taints, and the fix.
std::string lasting_taints_words(const untolerated& taints);

/// Lists the nodes (verb list on nodes) and answers untolerated_taints; `why` is set, and the
/// answer meaningless, when the list was refused or failed.
void ask_untolerated_taints(api& client, boost::json::object pod_spec,
                            unique_function<void(untolerated answer, std::string why)> done);

}  // namespace fiber::detail::kube
