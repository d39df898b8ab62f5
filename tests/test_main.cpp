// main() of every test binary: fiber::init first (workers re-execute this binary), and a
// listener that fails any test that leaves a child process behind.
#include <cstdio>

#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include "docker_support.hpp"
#include "kubernetes_support.hpp"
#include "slurm_support.hpp"
#include "support.hpp"

namespace {
class no_leftover_children : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo& info) override {
    auto left = fiber_test::child_pids();
    if (!left.empty()) {
      std::string pids;
      for (int p : left) pids += " " + std::to_string(p);
      ADD_FAILURE() << info.test_suite_name() << "." << info.name() << " left child processes behind:" << pids;
    }
    if (fiber_test::on_docker()) {
      auto containers = fiber_test::my_containers();
      if (!containers.empty()) {
        std::string ids;
        for (auto& id : containers) ids += " " + id.substr(0, 12);
        ADD_FAILURE() << info.test_suite_name() << "." << info.name() << " left containers behind:" << ids;
      }
    }
    if (fiber_test::on_kubernetes()) {
      auto pods = fiber_test::pods_of(fiber_test::master_label());
      if (!pods.empty()) {
        std::string names;
        for (auto& p : pods) names += " " + p;
        ADD_FAILURE() << info.test_suite_name() << "." << info.name() << " left pods behind:" << names;
      }
    }
    if (fiber_test::on_slurm()) {
      auto jobs = fiber_test::live_slurm_jobs_of(fiber_test::master_label());
      if (!jobs.empty()) {
        std::string ids;
        for (auto& j : jobs) ids += " " + j.id + " (" + j.state + ")";
        ADD_FAILURE() << info.test_suite_name() << "." << info.name() << " left Slurm jobs behind:" << ids;
      }
    }
  }
};

/// FIBERTEST_BACKEND=docker runs the suite with every child in a container of the test image,
/// which sees the host's /usr, /tmp and the build folder at the same paths.
/// FIBERTEST_BACKEND=slurm runs it with every child a Slurm job (or a step, when the binary runs
/// inside an allocation) on the test cluster, whose nodes share this host's file system.
void choose_backend() {
  const char* chosen = std::getenv("FIBERTEST_BACKEND");
  if (chosen && std::string_view(chosen) == "slurm") {
    ::setenv("FIBER_BACKEND", "slurm", 1);
    fiber_test::use_test_cluster();
    return;
  }
  if (!chosen) {
    // Local children get GPUs as slots from the devices the host has: the tests name two, which
    // children only see in CUDA_VISIBLE_DEVICES (nothing opens them).
    ::setenv("FIBER_GPUS", "0,1", 0);
    return;
  }
  std::string build = FIBER_TEST_BUILD_DIR;
  if (std::string_view(chosen) == "kubernetes") {
    // Pods of the test image see the host's /usr, /tmp and the build folder through hostPath
    // volumes, as the docker run's containers do through bind mounts.
    ::setenv("FIBER_BACKEND", "kubernetes", 1);
    ::setenv("FIBER_IMAGE", fiber_test::kube_test_image().c_str(), 1);
    ::setenv("FIBER_VOLUMES", ("/usr:/usr:ro,/tmp:/tmp," + build + ":" + build + ":ro").c_str(), 1);
    // The real test cluster's two nodes have this machine's two cores each, and the suites start
    // more pods than that at once (tests beside each other too): each pod requests a tenth of its
    // core, as a user overcommits a small cluster.
    if (fiber_test::on_real_cluster()) ::setenv("FIBER_KUBERNETES_CPU_REQUEST", "100m", 0);
    fiber_test::use_kube_test_cluster();
    return;
  }
  if (std::string_view(chosen) != "docker") return;
  ::setenv("FIBER_BACKEND", "docker", 1);
  ::setenv("FIBER_IMAGE", fiber_test::test_image, 1);
  ::setenv("FIBER_VOLUMES", ("/usr:/usr:ro,/tmp:/tmp," + build + ":" + build + ":ro").c_str(), 1);
}

class docker_engine_present : public ::testing::Environment {
  void SetUp() override {
    if (!fiber_test::on_docker()) return;
    asio::io_context io;
    fiber::detail::docker_engine engine(io);
    if (auto why = fiber_test::prepare_test_image(io, engine); !why.empty())
      FIBER_TEST_ENGINE_MISSING("Docker", "for the docker run of this suite: " + why);
  }
};
class kube_double_present : public ::testing::Environment {
  void SetUp() override {
    if (!fiber_test::on_kubernetes()) return;
    if (auto why = fiber_test::kube_problem(); !why.empty())
      FIBER_TEST_ENGINE_MISSING("Kubernetes", "for the kubernetes run of this suite: " + why);
    // A real cluster's nodes pull the suites' image from the test registry; the fault injector's pods are
    // containers of the test dockerd's own image.
    if (fiber_test::in_kube_pod() || fiber_test::on_real_cluster()) return;
    asio::io_context io;
    fiber::detail::docker_engine engine(io);
    if (auto why = fiber_test::prepare_test_image(io, engine); !why.empty())
      FIBER_TEST_ENGINE_MISSING("Docker", "for the kubernetes double's pods: " + why);
  }
};
class slurm_cluster_present : public ::testing::Environment {
  void SetUp() override {
    if (!fiber_test::on_slurm()) return;
    if (auto why = fiber_test::slurm_cluster_problem(); !why.empty())
      FIBER_TEST_ENGINE_MISSING("Slurm", "for the slurm run of this suite: " + why);
  }
};
}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("FIBERTEST_PREPARE_IMAGE")) {
    // For runners that start this binary in a container or pod of the test image: make sure
    // the engine has it, and nothing else.
    asio::io_context io;
    fiber::detail::docker_engine engine(io);
    auto why = fiber_test::prepare_test_image(io, engine);
    if (!why.empty()) std::fprintf(stderr, "cannot prepare %s: %s\n", fiber_test::test_image, why.c_str());
    return why.empty() ? 0 : 1;
  }
  choose_backend();
  fiber::init(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new docker_engine_present);
  ::testing::AddGlobalTestEnvironment(new slurm_cluster_present);
  ::testing::AddGlobalTestEnvironment(new kube_double_present);
  ::testing::UnitTest::GetInstance()->listeners().Append(new no_leftover_children);
  return RUN_ALL_TESTS();
}
