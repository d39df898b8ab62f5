// Which of the nodes' taints keep a pod off, read from a NodeList as the API server answers it,
// and which of them pass by themselves.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "backend/kubernetes/node_taints.hpp"

namespace kube = fiber::detail::kube;
namespace json = boost::json;

namespace {
json::value nodes(std::string_view text) { return json::parse(text); }

const char* const two_nodes = R"({"kind":"NodeList","items":[
  {"metadata":{"name":"k1"},"spec":{"taints":[
     {"key":"node.kubernetes.io/unreachable","effect":"NoSchedule","timeAdded":"2026-11-27T01:15:31Z"},
     {"key":"node.kubernetes.io/unreachable","effect":"NoExecute","timeAdded":"2026-11-27T01:15:31Z"}]}},
  {"metadata":{"name":"k2"},"spec":{"taints":[
     {"key":"fiber.test/reserved","value":"gpu-team","effect":"NoSchedule"},
     {"key":"example.com/slow","effect":"PreferNoSchedule"}]}},
  {"metadata":{"name":"k3"},"spec":{}}]})";
}  // namespace

TEST(node_taints, each_tainted_node_is_named_with_the_taints_that_keep_pods_off) {
  auto u = kube::untolerated_taints(nodes(two_nodes), nullptr);
  EXPECT_EQ(u.nodes,
            "k1 (node.kubernetes.io/unreachable:NoSchedule, node.kubernetes.io/unreachable:NoExecute), "
            "k2 (fiber.test/reserved=gpu-team:NoSchedule)");
  EXPECT_FALSE(u.passing) << "k2's taint stays until someone acts";
}

TEST(node_taints, taints_of_the_node_lifecycle_pass_and_others_do_not) {
  for (auto key : {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable", "node.kubernetes.io/memory-pressure",
                   "node.kubernetes.io/disk-pressure", "node.kubernetes.io/pid-pressure",
                   "node.kubernetes.io/network-unavailable", "node.cloudprovider.kubernetes.io/uninitialized"})
    EXPECT_TRUE(kube::passing_taint(key)) << key;
  // A cordon, a cloud's shut-down node and an admin's own taint are there until someone acts.
  for (auto key : {"node.kubernetes.io/unschedulable", "node.cloudprovider.kubernetes.io/shutdown", "fiber.test/reserved",
                   "node.kubernetes.io", ""})
    EXPECT_FALSE(kube::passing_taint(key)) << key;
}

TEST(node_taints, tolerated_taints_keep_nothing_off) {
  // Exists with the key tolerates every value; an effect named tolerates that effect alone.
  auto spec = json::parse(R"({"tolerations":[
      {"key":"fiber.test/reserved","operator":"Exists"},
      {"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]})")
                  .as_object();
  auto u = kube::untolerated_taints(nodes(two_nodes), &spec);
  EXPECT_EQ(u.nodes, "k1 (node.kubernetes.io/unreachable:NoSchedule)");
  EXPECT_TRUE(u.passing);
  // Equal (the default operator) needs the value too; Exists without a key tolerates everything.
  auto wrong_value = json::parse(R"({"tolerations":[{"key":"fiber.test/reserved","value":"cpu-team"}]})").as_object();
  EXPECT_NE(kube::untolerated_taints(nodes(two_nodes), &wrong_value).nodes.find("k2"), std::string::npos);
  auto right_value = json::parse(R"({"tolerations":[{"key":"fiber.test/reserved","value":"gpu-team"}]})").as_object();
  EXPECT_EQ(kube::untolerated_taints(nodes(two_nodes), &right_value).nodes.find("k2"), std::string::npos);
  auto everything = json::parse(R"({"tolerations":[{"operator":"Exists"}]})").as_object();
  auto none = kube::untolerated_taints(nodes(two_nodes), &everything);
  EXPECT_EQ(none.nodes, "");
  EXPECT_TRUE(none.passing);
}

TEST(node_taints, a_list_without_taints_or_not_a_list_names_no_node) {
  EXPECT_EQ(kube::untolerated_taints(nodes(R"({"items":[{"metadata":{"name":"k1"}}]})"), nullptr).nodes, "");
  EXPECT_EQ(kube::untolerated_taints(nodes(R"({"kind":"Status","code":403})"), nullptr).nodes, "");
  EXPECT_EQ(kube::untolerated_taints(nodes("[1,2]"), nullptr).nodes, "");
}

TEST(node_taints, the_schedulers_words_for_taints_are_told_from_its_others) {
  EXPECT_TRUE(kube::refused_for_taints("0/2 nodes are available: 2 node(s) had untolerated taint(s). preemption: ..."));
  EXPECT_TRUE(kube::refused_for_taints("0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint(s)."));
  EXPECT_FALSE(kube::refused_for_taints("0/2 nodes are available: 2 Insufficient nvidia.com/gpu."));
  EXPECT_FALSE(kube::refused_for_taints("0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."));
}
