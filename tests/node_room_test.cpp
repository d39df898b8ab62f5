// The capacity check the cluster backends share, and the Kubernetes node list it reads.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "backend/kubernetes/node_list.hpp"
#include "backend/node_room.hpp"
#include "support.hpp"

using fiber::detail::check_rooms;
using fiber::detail::node_room;
using fiber::detail::room_words;
using fiber::detail::spawn_spec;
namespace kube = fiber::detail::kube;

namespace {
spawn_spec asking(int cpu, int memory_mb, int gpu) {
  spawn_spec s;
  s.name = "Process-7";
  s.cpu = cpu;
  s.memory_mb = memory_mb;
  s.gpu = gpu;
  return s;
}
const room_words words{"the test's nodes", "nvidia.com/gpu", "add a node"};
}  // namespace

TEST(node_room, a_request_one_node_meets_passes_even_when_no_single_node_meets_the_sum) {
  std::vector<node_room> nodes{{"big-cpu", 32, 1024, 0}, {"big-gpu", 4, 65536, 2}};
  EXPECT_NO_THROW(check_rooms(nodes, asking(32, 1024, 0), words));
  EXPECT_NO_THROW(check_rooms(nodes, asking(4, 60000, 2), words));
  // 32 CPUs live on one node and 2 GPUs on the other: no node has both.
  fiber_test::expect_error([&] { check_rooms(nodes, asking(32, 0, 2), words); }, fiber::errc::unsatisfiable,
                           {"Process-7 asks for cpu 32, 2 nvidia.com/gpu", "big-cpu has cpu 32, memory 1024 MiB, 0 nvidia.com/gpu",
                            "big-gpu has cpu 4", "ask for less", "add a node"});
}

TEST(node_room, unknown_gpus_are_left_to_the_engine_and_no_nodes_is_said) {
  std::vector<node_room> engine{{"the engine", 2, 4096, -1}};
  EXPECT_NO_THROW(check_rooms(engine, asking(1, 0, 8), words));
  fiber_test::expect_error([&] { check_rooms(engine, asking(1, 8192, 0), words); }, fiber::errc::unsatisfiable,
                           {"memory 8192 MiB", "the engine has cpu 2, memory 4096 MiB)"});
  fiber_test::expect_error([&] { check_rooms({}, asking(1, 0, 0), words); }, fiber::errc::unsatisfiable,
                           "there are none");
}

TEST(node_room, kubernetes_quantities_in_every_notation) {
  EXPECT_DOUBLE_EQ(kube::quantity("64").value_or(-1), 64.0);
  EXPECT_DOUBLE_EQ(kube::quantity("3900m").value_or(-1), 3.9);
  EXPECT_DOUBLE_EQ(kube::quantity("16Gi").value_or(-1), 16.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(kube::quantity("129900Ki").value_or(-1), 129900.0 * 1024);
  EXPECT_DOUBLE_EQ(kube::quantity("1.5G").value_or(-1), 1.5e9);
  EXPECT_DOUBLE_EQ(kube::quantity("1e3").value_or(-1), 1000.0);
  EXPECT_DOUBLE_EQ(kube::quantity("2E+2").value_or(-1), 200.0);
  EXPECT_FALSE(kube::quantity(""));
  EXPECT_FALSE(kube::quantity("lots"));
  EXPECT_FALSE(kube::quantity("12Qi"));
}

TEST(node_room, a_node_list_gives_each_schedulable_nodes_allocatable) {
  auto list = boost::json::parse(R"({"kind":"NodeList","items":[
    {"metadata":{"name":"a"},"spec":{},"status":{"capacity":{"cpu":"8"},
      "allocatable":{"cpu":"7910m","memory":"30Gi","nvidia.com/gpu":"4"}}},
    {"metadata":{"name":"cordoned"},"spec":{"unschedulable":true},"status":{"allocatable":{"cpu":"96","memory":"1Ti"}}},
    {"metadata":{"name":"b"},"status":{"allocatable":{"cpu":"2","memory":"4194304Ki"}}},
    {"metadata":{"name":"no-status"}}]})");
  auto rooms = kube::node_rooms(list, "nvidia.com/gpu");
  ASSERT_EQ(rooms.size(), 2u);
  EXPECT_EQ(rooms[0].name, "a");
  EXPECT_DOUBLE_EQ(rooms[0].cpus, 7.91);
  EXPECT_EQ(rooms[0].memory_mb, 30 * 1024);
  EXPECT_EQ(rooms[0].gpus, 4);
  EXPECT_EQ(rooms[1].name, "b");
  EXPECT_EQ(rooms[1].memory_mb, 4096);
  EXPECT_EQ(rooms[1].gpus, 0);
  // Fractional CPUs are said in Kubernetes' own notation.
  fiber_test::expect_error([&] { check_rooms(rooms, asking(8, 0, 0), words); }, fiber::errc::unsatisfiable,
                           "a has cpu 7910m");
}
