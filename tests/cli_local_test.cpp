// `fiber run --backend local`: the master runs here, with the resources a local child with the
// same needs would get.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "cli_support.hpp"

using fiber_test::fiber_cmd;

namespace {
// What the master sees: its devices, what its children may have, its CPUs and its memory limit.
constexpr const char* report =
    "-- sh -c 'echo \"gpus=$CUDA_VISIBLE_DEVICES nvidia=$NVIDIA_VISIBLE_DEVICES children=$FIBER_GPUS "
    "cpus=$(nproc) vmem=$(ulimit -v)\"; exit 7'";
}  // namespace

TEST(fiber_command_local, gpu_takes_the_hosts_devices_and_leaves_the_rest_to_the_children) {
  auto r = fiber_cmd(std::string("run --backend local --gpu 1 ") + report, "FIBER_GPUS=0,1");
  EXPECT_EQ(r.code, 7) << r.out;  // the program's own exit status
  EXPECT_NE(r.out.find("gpus=0 nvidia=0 children=1 "), std::string::npos) << r.out;
  auto both = fiber_cmd(std::string("run --backend local --gpu 2 ") + report, "FIBER_GPUS=0,1");
  EXPECT_NE(both.out.find("gpus=0,1 nvidia=0,1 children=none "), std::string::npos) << both.out;
}

TEST(fiber_command_local, more_gpus_than_the_host_has_fail_before_anything_runs) {
  auto r = fiber_cmd(std::string("run --backend local --gpu 3 ") + report, "FIBER_GPUS=0,1");
  EXPECT_EQ(r.code, 125) << r.out;
  EXPECT_NE(r.out.find("asks for 3 GPUs and this host has 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lower --gpu"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("nvidia="), std::string::npos) << "the program ran: " << r.out;
}

TEST(fiber_command_local, cpu_pins_the_master_and_memory_limits_it) {
  auto r = fiber_cmd(std::string("run --backend local --cpu 1 --memory 512M ") + report);
  EXPECT_EQ(r.code, 7) << r.out;
  EXPECT_NE(r.out.find("cpus=1 vmem=524288"), std::string::npos) << r.out;
  // Without them the master is left as it was.
  auto plain = fiber_cmd(std::string("run --backend local ") + report);
  EXPECT_NE(plain.out.find("vmem=unlimited"), std::string::npos) << plain.out;
}
