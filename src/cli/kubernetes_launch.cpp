// `fiber run --backend kubernetes`: the run as a Job whose pod is the master, its tokens in a
// Secret the Job owns (cli/run_tokens), followed until it ends or the user detaches.
#include <boost/json.hpp>
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include "backend/docker/blocking_engine.hpp"
#include "backend/kubernetes/pod_manifest.hpp"
#include "cli/image_plan.hpp"
#include "cli/kubernetes_job.hpp"
#include "cli/kubernetes_runner.hpp"
#include "cli/kubernetes_session.hpp"
#include "cli/pod_attachment.hpp"
#include "cli/recording_taker.hpp"
#include "cli/run_names.hpp"
#include "cli/run_tokens.hpp"
#include "core/flight_recorder.hpp"
#include "core/random_token.hpp"
#include "core/volume.hpp"
#include "fiber/config.hpp"
#include "fiber/error.hpp"

namespace fiber::cli {
namespace json = boost::json;

namespace {

/// A run as a Job whose pod is the master; the master makes its workers' pods itself.
class kubernetes_launch final : public launch {
 public:
  kubernetes_launch(kubernetes_runner::session& s, const run_options& o, image_plan image, job_settings js)
      : launch(js.name), s_(s), o_(o), image_(std::move(image)), js_(std::move(js)), manifest_(job_manifest(js_)) {}

  boost::json::object plan() const override {
    json::object plan;
    if (image_.context) plan["build"] = describe_build(image_, o_);
    plan["server"] = s_.where.server;
    plan["namespace"] = s_.ns;
    plan["create"] = manifest_;
    return plan;
  }

  void prepare() override {
    // What the pod needs must exist, or it would wait for it forever: the claims, the account.
    for (auto& v : detail::parse_volumes(joined_volumes(o_.volumes)))
      if (!v.source.starts_with('/')) {
        auto r = s_.call("GET", "/api/v1/namespaces/" + s_.ns + "/persistentvolumeclaims/" + v.source, {},
                         {"get", "persistentvolumeclaims"});
        if (r.status == 404)
          throw error(errc::config_error, "no PersistentVolumeClaim named '" + v.source + "' in namespace " + s_.ns +
                                              ": create it (kubectl apply -f a claim of that name) or check -v " + v.source);
        if (r.ec && r.status != 403) throw error(errc::backend_unavailable, r.why);
      }
    auto sa = s_.call("GET", "/api/v1/namespaces/" + s_.ns + "/serviceaccounts/" + js_.service_account, {},
                      {"get", "serviceaccounts"});
    if (sa.status == 404)
      throw error(errc::config_error, "no service account '" + js_.service_account + "' in namespace " + s_.ns +
                                          ": the master needs one allowed to manage pods: kubectl apply -n " + s_.ns +
                                          " -f " + detail::kube::rbac_manifest + " (or set kubernetes_service_account)");
    if (sa.ec && sa.status != 403) throw error(errc::backend_unavailable, sa.why);
    if (image_.context) {
      detail::blocking_engine engine{std::string{}};
      engine.run<std::string>([](detail::docker_engine& e, auto done) { e.check(std::move(done)); });
      build_and_push(image_, o_, engine, /*must_be_local=*/false);
      js_.image = image_.ref;
      manifest_ = job_manifest(js_);
    }
  }

  std::string create() override {
    auto created = s_.call("POST", s_.jobs_path() + "?fieldValidation=Strict", json::serialize(manifest_), {"create", "jobs"});
    if (created.status == 409)
      throw error(errc::config_error, "a run named '" + name() + "' exists in namespace " + s_.ns + ": `fiber stop " +
                                          name() + "` removes it, or choose another --name");
    if (created.ec) throw error(errc::backend_unavailable, created.why);
    keep_tokens(created.body);
    return "created Job " + name() + " in namespace " + s_.ns + " (image " + image_.ref + ")";
  }

  /// Attached or not, until the Job has made its pod: a run that cannot start says why.
  std::optional<int> follow(bool attach) override {
    pod_attachment a(s_.api, s_.ns, name(), s_.cfg.kubernetes_autoscaling);
    recording_taker taker(s_.api.io(), attach ? js_.record_token : std::string(), detail::record_folder(config::load()));
    a.on_line([&](const std::string& pod, std::string_view line) {
      auto route = [&, pod](detail::http_request& req, std::uint16_t port, const std::string& target) {
        s_.api.api().where().prepare(req, s_.pods_path() + "/" + pod + ":" + std::to_string(port) + "/proxy" + target);
      };
      a.hold();  // until it is here: the master waits for it before it ends
      if (!taker.take_if_offered(line, route, [&a] { a.release(); })) a.release();
    });
    auto out = a.run(attach, [](const std::string& pod) {
      std::printf("Created pod: %s\n", pod.c_str());
      std::fflush(stdout);
    });
    if (out.detached) return std::nullopt;
    if (!out.failure.empty()) {
      // Nothing useful is left of a run that cannot start: it goes, and says so.
      s_.call("DELETE", s_.jobs_path() + "/" + name(), R"({"propagationPolicy":"Background"})", {"delete", "jobs"});
      throw error(errc::spawn_failed, "run " + name() + ": " + out.failure + "; the run was removed");
    }
    return attach ? out.exit_code : 0;
  }

 private:
  /// The run's tokens in a Secret its Job owns (cli/run_tokens), which the master's pod mounts; a
  /// run whose Secret cannot be made goes.
  void keep_tokens(const json::value& job) {
    std::map<std::string, std::string> tokens;
    if (!js_.dashboard_token.empty()) tokens[dashboard_token_key] = js_.dashboard_token;
    if (!js_.record_token.empty()) tokens[recording_token_key] = js_.record_token;
    if (tokens.empty()) return;
    auto uid = str(obj(obj(&job), "metadata"), "uid");
    json::object labels{{detail::kube::managed_by_label, "fiber"}, {run_label, name()}, {user_label, detail::kube::label_value(js_.user)}};
    auto made = s_.call("POST", "/api/v1/namespaces/" + s_.ns + "/secrets",
                        json::serialize(run_tokens_manifest(name(), uid, labels, tokens)), {"create", "secrets"});
    if (!made.ec) return;
    s_.call("DELETE", s_.jobs_path() + "/" + name(), R"({"propagationPolicy":"Background"})", {"delete", "jobs"});
    throw error(errc::backend_unavailable, "run " + name() + ": cannot keep its tokens in a Secret: " + made.why +
                                               "; the run was removed");
  }

  kubernetes_runner::session& s_;
  const run_options& o_;
  image_plan image_;
  job_settings js_;
  json::object manifest_;
};

}  // namespace

std::unique_ptr<launch> kubernetes_runner::plan_run(const run_options& o) {
  auto image = plan_image(o);
  auto name = o.name.empty() ? default_run_name(o.command[0]) : o.name;
  check_kubernetes_name(name);
  if (image.context && o.registry.empty())
    throw error(errc::config_error, "--build on Kubernetes needs --registry HOST[:PORT][/PATH] (or FIBER_REGISTRY): "
                                    "the cluster's nodes pull the image from a registry, not from this machine");
  auto& s = *s_;
  job_settings js;
  js.name = name;
  js.user = user_name();
  js.image = image.ref;
  js.service_account = s.cfg.kubernetes_service_account.empty() ? default_service_account : s.cfg.kubernetes_service_account;
  js.gpu_resource = s.cfg.kubernetes_gpu_resource;
  js.pod_patch = s.cfg.kubernetes_pod_patch;
  js.command = image.command;
  js.env = o.env;
  js.volumes = o.volumes;
  // Attached, this command is there at the run's end to take its recording (the pod's files go
  // with the pod), unless recording is off here or the run was given a record switch of its own.
  if (o.attach && config::load().record &&
      std::none_of(o.env.begin(), o.env.end(), [](const std::string& kv) { return kv.starts_with("FIBER_RECORD"); }))
    js.record_token = detail::random_token();
  js.dashboard_token = detail::random_token();  // used when the run turns its page on
  js.cpu = o.cpu;
  js.memory_bytes = o.memory_bytes;
  js.gpu = o.gpu;
  js.restarts = o.restarts;  // a durable master's pod made again takes its run up (apply_durable)
  // The manifest is made now: it checks the flags before anything is built.
  return std::make_unique<kubernetes_launch>(s, o, std::move(image), std::move(js));
}

}  // namespace fiber::cli
