// main() of every test binary: fiber::init first (workers re-execute this binary), and a
// listener that fails any test that leaves a child process behind.
#include <chrono>
#include <cstdio>

#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include "docker_support.hpp"
#include "engine_presence.hpp"
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
    if (auto why = fiber_test::docker_absent(); !why.empty())
      FIBER_TEST_ENGINE_MISSING("Docker", "for the docker run of this suite: " + why);
    asio::io_context io;
    fiber::detail::docker_engine engine(io);
    if (auto why = fiber_test::prepare_test_image(io, engine); !why.empty())
      FIBER_TEST_SETUP_FAILED("the Docker engine answers, and fiber's docker_engine could not prepare the test image: " + why);
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
    if (auto why = fiber_test::docker_absent(); !why.empty())
      FIBER_TEST_ENGINE_MISSING("Docker", "for the kubernetes double's pods: " + why);
    asio::io_context io;
    fiber::detail::docker_engine engine(io);
    if (auto why = fiber_test::prepare_test_image(io, engine); !why.empty())
      FIBER_TEST_SETUP_FAILED("the Docker engine answers, and fiber's docker_engine could not prepare the image of the kubernetes double's pods: " + why);
  }
};
class slurm_cluster_present : public ::testing::Environment {
  void SetUp() override {
    if (!fiber_test::on_slurm()) return;
    if (auto why = fiber_test::slurm_absent(); !why.empty())
      FIBER_TEST_ENGINE_MISSING("Slurm", "for the slurm run of this suite: " + why);
  }
};
/// Under scripts/test.sh (FIBERTEST_RESULTS_DIR set), gtest's XML report of this run is kept there,
/// named by binary, backend and pid; a --gtest_output on the command line (the runners of
/// tests/slurm and tests/kubernetes give one) wins, as gtest parses it after this default.
/// scripts/test_summary.py checks from the reports that every ctest entry that passed ran a test.
void keep_report(int argc, char** argv) {
  const char* dir = std::getenv("FIBERTEST_RESULTS_DIR");
  if (!dir || !*dir || std::getenv("GTEST_OUTPUT")) return;
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]).starts_with("--gtest_list_tests")) return;  // ctest's discovery
  std::string exe = argv[0];
  exe = exe.substr(exe.rfind('/') + 1);
  const char* backend = std::getenv("FIBERTEST_BACKEND");
  // The pid and the time: pids come round again within one suite (pid_max is often 32768, and a
  // suite starts tens of thousands of processes), and a second report must not replace the first.
  auto now = std::chrono::system_clock::now().time_since_epoch().count();
  GTEST_FLAG_SET(output, "xml:" + std::string(dir) + "/" + exe + "--" + (backend && *backend ? backend : "local") +
                             "--" + std::to_string(::getpid()) + "-" + std::to_string(now) + ".xml");
}
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
  keep_report(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new docker_engine_present);
  ::testing::AddGlobalTestEnvironment(new slurm_cluster_present);
  ::testing::AddGlobalTestEnvironment(new kube_double_present);
  ::testing::UnitTest::GetInstance()->listeners().Append(new no_leftover_children);
  int failed = RUN_ALL_TESTS();
  // gtest passes a run whose filter matched nothing; ctest would call that entry passed.
  if (!GTEST_FLAG_GET(list_tests) && ::testing::UnitTest::GetInstance()->test_to_run_count() == 0) {
    std::fprintf(stderr, "FAILED: no test of this binary matches --gtest_filter=%s: nothing ran\n",
                 GTEST_FLAG_GET(filter).c_str());
    return 1;
  }
  return failed;
}
