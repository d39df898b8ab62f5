#include "cli/kubernetes_runner.hpp"

#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "core/volume.hpp"
#include "backend/docker/blocking_engine.hpp"
#include "backend/kubernetes/blocking_api.hpp"
#include "backend/kubernetes/kube_access.hpp"
#include "backend/kubernetes/pod_manifest.hpp"
#include "backend/kubernetes/pod_watch.hpp"
#include "cli/claim_copy.hpp"
#include "cli/image_plan.hpp"
#include "cli/run_standing.hpp"
#include "cli/kubernetes_claim_copy.hpp"
#include "cli/kubernetes_job.hpp"
#include "cli/kubernetes_session.hpp"
#include "cli/pod_attachment.hpp"
#include "cli/pod_state.hpp"
#include "cli/recording_taker.hpp"
#include "core/flight_recorder.hpp"
#include "runtime/observe/dashboard.hpp"
#include "cli/run_tokens.hpp"
#include "runtime/claim_copy_service.hpp"
#include "cli/run_names.hpp"
#include "fiber/config.hpp"
#include "fiber/error.hpp"
#include "transport/http_client.hpp"
#include "transport/run_until.hpp"

namespace fiber::cli {
namespace json = boost::json;
using detail::kube::blocking_api;

namespace {

/// "2024-01-02T03:04:05Z" → seconds since the epoch (0 when unreadable).
std::int64_t epoch_of(const std::string& t) {
  std::tm tm{};
  if (!strptime(t.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm)) return 0;
  return static_cast<std::int64_t>(timegm(&tm));
}

std::string age(const std::string& created) { return age_since(epoch_of(created)); }

/// Each run's newest master pod among `pods` (those being deleted left out), by run name.
std::map<std::string, const json::object*> masters_of(const json::array& pods) {
  std::map<std::string, const json::object*> masters;
  for (auto& p : pods) {
    auto* meta = obj(obj(&p), "metadata");
    if (meta && meta->contains("deletionTimestamp")) continue;
    if (auto run = str(obj(meta, "labels"), run_label); !run.empty()) {
      auto& m = masters[run];
      if (!m || str(obj(m, "metadata"), "creationTimestamp") <= str(meta, "creationTimestamp")) m = obj(&p);
    }
  }
  return masters;
}

/// Where a run stands: pending, running, succeeded or failed, and why in a few words. Its Job's
/// condition once the Job controller has set it; before that its master pod's: the Job has one
/// pod (backoffLimit 0) and follows it moments later, and `ps` and `gc` right after the master
/// ended must already see it ended.
struct standing {
  std::string state = "pending", status;
  bool ended() const { return state == "succeeded" || state == "failed"; }
};
standing standing_of(const json::value& job, const json::object* master) {
  standing r;
  if (auto* conditions = arr(obj(obj(&job), "status"), "conditions"))
    for (auto& c : *conditions) {
      auto type = str(obj(&c), "type");
      if (str(obj(&c), "status") != "True") continue;
      if (type == "Complete") r.state = "succeeded";
      if (type == "Failed") r.state = "failed", r.status = str(obj(&c), "reason");
    }
  // A durable master's Job makes a new pod for one that failed or was deleted: resuming until
  // the new one runs, then its count beside its status.
  auto failed = static_cast<int>(num(obj(obj(&job), "status"), "failed"));
  bool ended = r.state == "succeeded" || r.state == "failed";
  if (!master) {
    r.state = run_state(r.state, ended ? 0 : failed, true);
    r.status = with_restarts(r.status, ended ? 0 : failed);
    return r;
  }
  auto st = state_of(*master);
  if (r.state == "pending" && st.exit_code) r.state = *st.exit_code == 0 && st.started ? "succeeded" : "failed";
  if (r.state == "pending" && st.phase == "Running") r.state = "running";
  if (st.exit_code && st.started)
    r.status = "exit code " + std::to_string(*st.exit_code) + (st.reason.empty() ? "" : " (" + st.reason + ")");
  else if (!st.reason.empty())
    r.status = st.reason;
  if (!ended) {
    r.state = run_state(r.state, failed, st.phase != "Running");
    r.status = with_restarts(r.status, failed);
  }
  return r;
}

}  // namespace


kubernetes_runner::kubernetes_runner() : s_(std::make_unique<session>()) {}
kubernetes_runner::~kubernetes_runner() = default;


int kubernetes_runner::ps() {
  auto& s = *s_;
  auto jobs = s.list(s.jobs_path(), std::string(detail::kube::managed_by_label) + "=fiber," + s.mine(), {"list", "jobs"});
  auto pods = s.list(s.pods_path(), std::string(detail::kube::managed_by_label) + "=fiber", {"list", "pods"});
  auto masters = masters_of(pods);
  std::map<std::string, int> workers;  // master pod uid → running workers
  for (auto& p : pods) {
    auto* meta = obj(obj(&p), "metadata");
    if (meta && meta->contains("deletionTimestamp")) continue;
    if (auto* owners = arr(meta, "ownerReferences"))
      for (auto& r : *owners)
        if (str(obj(&r), "kind") == "Pod" && str(obj(obj(&p), "status"), "phase") == "Running") ++workers[str(obj(&r), "uid")];
  }
  std::printf("%-32s %-10s %-40s %-6s %s\n", "NAME", "STATE", "STATUS", "AGE", "WORKERS");
  for (auto& j : jobs) {
    auto* meta = obj(obj(&j), "metadata");
    auto name = str(meta, "name");
    auto it = masters.find(name);
    auto* master = it == masters.end() ? nullptr : it->second;
    auto [state, status] = standing_of(j, master);
    int running = master ? workers[str(obj(master, "metadata"), "uid")] : 0;
    if (status.size() > 40) status = status.substr(0, 37) + "...";
    std::printf("%-32s %-10s %-40s %-6s %d\n", name.c_str(), state.c_str(), status.c_str(),
                age(str(meta, "creationTimestamp")).c_str(), running);
  }
  return 0;
}

int kubernetes_runner::logs(const logs_options& o) {
  auto& s = *s_;
  s.job(o.name);
  auto master = s.master_pod(o.name);
  auto pod = str(obj(&master, "metadata"), "name");
  std::string container = master_container;
  if (pod.empty() && !o.follow)
    throw error(errc::config_error, "run " + o.name + " has no pod (yet): `fiber ps` says what keeps it pending");
  if (o.follow && o.process.empty()) {
    // Through pending, to its end, as run --attach: its output, and the reason when it cannot run.
    pod_attachment a(s.api, s.ns, o.name, true);
    auto out = a.run(true, [](const std::string&) {});
    if (!out.failure.empty()) throw error(errc::spawn_failed, "run " + o.name + ": " + out.failure);
    return out.detached ? 130 : 0;
  }
  if (!o.process.empty()) {
    auto uid = str(obj(&master, "metadata"), "uid");
    std::string found;
    for (auto& p : s.list(s.pods_path(), std::string(detail::kube::process_label) + "=" + detail::kube::label_value(o.process),
                          {"list", "pods"})) {
      auto* meta = obj(obj(&p), "metadata");
      if (auto* owners = arr(meta, "ownerReferences"))
        for (auto& r : *owners)
          if (str(obj(&r), "uid") == uid) found = str(meta, "name");
    }
    if (found.empty())
      throw error(errc::config_error, "run " + o.name + " has no process '" + o.process +
                                          "' now (a worker's pod goes when it ends): `fiber ps` shows its workers");
    pod = found;
    container = detail::kube::container_name;
  }
  auto path = s.pods_path() + "/" + pod + "/log?container=" + container + (o.follow ? "&follow=true" : "");
  std::string failure;
  bool ended = false;
  s.api.api().stream(
      path, std::chrono::milliseconds(0), {"get", "pods/log"},
      [](std::string_view line) {
        std::fwrite(line.data(), 1, line.size(), stdout);
        std::fputc('\n', stdout);
        std::fflush(stdout);
      },
      [&](std::error_code ec, long, std::string why) {
        ended = true;
        if (ec) failure = std::move(why);
      });
  detail::run_until(s.api.io(), [&] { return ended; });
  if (!failure.empty()) throw error(errc::backend_unavailable, "reading the output of " + pod + ": " + failure);
  return 0;
}

int kubernetes_runner::stop(const std::string& name) {
  auto& s = *s_;
  s.job(name);
  auto master = s.master_pod(name);
  auto master_uid = str(obj(&master, "metadata"), "uid");
  // Foreground: the Job goes once its pod has. The master, told by SIGTERM, removes its workers,
  // and owner references remove whatever it leaves.
  s.must("DELETE", s.jobs_path() + "/" + name, R"({"propagationPolicy":"Foreground"})", {"delete", "jobs"});
  // It returns once they are gone.
  auto limit = std::chrono::seconds(90);
  s.await(s.jobs_path(), "fieldSelector=" + detail::percent_encode("metadata.name=" + name),
          [](const json::array& jobs) { return jobs.empty(); }, limit,
          "run " + name + " was told to stop but its Job is still there: `kubectl describe job " + name + "` says why");
  s.await(s.pods_path(), "labelSelector=" + detail::percent_encode(std::string(detail::kube::managed_by_label) + "=fiber"),
          [&](const json::array& pods) {
            for (auto& p : pods) {
              auto* meta = obj(obj(&p), "metadata");
              if (str(obj(meta, "labels"), "job-name") == name) return false;
              if (auto* owners = arr(meta, "ownerReferences"))
                for (auto& r : *owners)
                  if (!master_uid.empty() && str(obj(&r), "uid") == master_uid) return false;
            }
            return true;
          },
          limit, "run " + name + " was told to stop but pods of it remain: `kubectl get pods -l fiber.run=" + name + "`");
  std::fprintf(stderr, "fiber: stopped %s\n", name.c_str());
  return 0;
}

int kubernetes_runner::gc() {
  auto& s = *s_;
  int removed = 0;
  auto pods = s.list(s.pods_path(), std::string(detail::kube::managed_by_label) + "=fiber," + s.mine(), {"list", "pods"});
  auto masters = masters_of(pods);
  for (auto& j : s.list(s.jobs_path(), std::string(detail::kube::managed_by_label) + "=fiber," + s.mine(), {"list", "jobs"})) {
    auto name = str(obj(obj(&j), "metadata"), "name");
    auto it = masters.find(name);
    auto run = standing_of(j, it == masters.end() ? nullptr : it->second);
    if (!run.ended()) continue;
    auto& ended = run.state;
    // Background: its pod goes, and with it (owner references) any worker the master left.
    auto r = s.call("DELETE", s.jobs_path() + "/" + name, R"({"propagationPolicy":"Background"})", {"delete", "jobs"});
    if (r.ec && r.status != 404) throw error(errc::backend_unavailable, r.why);
    std::printf("removing ended run %s (%s)\n", name.c_str(), ended.c_str());
    ++removed;
  }
  // fiber cp's helper pods that a killed command left: ended (idle, they end by themselves) or
  // older than any copy takes to start and go idle.
  for (auto& p : s.list(s.pods_path(), std::string(helper_label) + "=cp," + s.mine(), {"list", "pods"})) {
    auto* meta = obj(obj(&p), "metadata");
    auto phase = str(obj(obj(&p), "status"), "phase");
    auto age_s = std::time(nullptr) - epoch_of(str(meta, "creationTimestamp"));
    if (phase != "Succeeded" && phase != "Failed" &&
        age_s < detail::claim_copy_idle_seconds + s.cfg.kubernetes_pending_timeout_ms / 1000 + 60)
      continue;
    auto r = s.call("DELETE", s.pods_path() + "/" + str(meta, "name"), R"({"gracePeriodSeconds":0})", {"delete", "pods"});
    if (r.ec && r.status != 404) throw error(errc::backend_unavailable, r.why);
    std::printf("removing fiber cp's helper pod %s (%s)\n", str(meta, "name").c_str(), phase.c_str());
    // ... and the Secret of its name with its token (deleted by name: the command lists no Secret).
    auto t = s.call("DELETE", "/api/v1/namespaces/" + s.ns + "/secrets/" + str(meta, "name"), R"({"gracePeriodSeconds":0})",
                    {"delete", "secrets"});
    if (t.ec && t.status != 404) throw error(errc::backend_unavailable, t.why);
  }
  std::printf("%d run(s) removed\n", removed);
  return 0;
}

int kubernetes_runner::cp(const copy_options& o) {
  auto plan = plan_copy(o.src, o.dst);
  if (!o.image.empty() && o.program.empty())
    throw error(errc::config_error, "--image " + o.image + " needs --program: the path of a fiber program in that image");
  auto& s = *s_;
  auto claim = s.call("GET", "/api/v1/namespaces/" + s.ns + "/persistentvolumeclaims/" + plan.claim, {},
                      {"get", "persistentvolumeclaims"});
  if (claim.status == 404)
    throw error(errc::config_error, "no PersistentVolumeClaim named '" + plan.claim + "' in namespace " + s.ns +
                                        ": `kubectl get pvc -n " + s.ns + "` lists them");
  if (claim.ec && claim.status != 403) throw error(errc::backend_unavailable, claim.why);

  // The helper runs a fiber program of the user's: the one asked for, else the newest run's.
  helper_pod_settings hs;
  hs.user = user_name();
  hs.pod_patch = s.cfg.kubernetes_pod_patch;
  hs.max_message_bytes = s.cfg.max_message_bytes;
  hs.image = o.image;
  hs.program = o.program;
  if (hs.image.empty()) {
    // The newest run whose master started (as its pod says): a run still pending, or one whose
    // image cannot be pulled, has no program a helper could run.
    auto pods = s.list(s.pods_path(), std::string(detail::kube::managed_by_label) + "=fiber," + s.mine(), {"list", "pods"});
    auto masters = masters_of(pods);
    json::object newest;
    for (auto& j : s.list(s.jobs_path(), std::string(detail::kube::managed_by_label) + "=fiber," + s.mine(), {"list", "jobs"})) {
      auto master = masters.find(str(obj(obj(&j), "metadata"), "name"));
      if (master == masters.end() || !state_of(*master->second).started) continue;
      if (str(obj(obj(&j), "metadata"), "creationTimestamp") >= str(obj(&newest, "metadata"), "creationTimestamp"))
        newest = *obj(&j);
    }
    auto* containers = arr(obj(obj(obj(&newest, "spec"), "template"), "spec"), "containers");
    auto* master = containers && !containers->empty() ? obj(&containers->at(0)) : nullptr;
    auto* command = arr(master, "command");
    if (!master || !command || command->empty() || !command->at(0).is_string())
      throw error(errc::config_error, "fiber cp on Kubernetes runs a fiber program of yours in a helper pod that mounts "
                                      "the claim: name one with --image IMAGE --program /its/path, or start a run first "
                                      "(the image and program of your newest run that ran are the default)");
    hs.image = str(master, "image");
    if (hs.program.empty()) hs.program = detail::kube::from_kube_literal(command->at(0).as_string());
    // Said up front: the newest run may be of a program that is no fiber program (`-- /bin/cat`).
    std::fprintf(stderr, "fiber: the helper pod runs %s of your newest run that ran, %s (--image and --program choose another)\n",
                 hs.program.c_str(), str(obj(&newest, "metadata"), "name").c_str());
  }
  copy_through_helper_pod(s.api, s.ns, plan, hs, std::chrono::milliseconds(s.cfg.kubernetes_pending_timeout_ms));
  return 0;
}

std::string kubernetes_runner::master_output(const std::string& name) {
  auto& s = *s_;
  s.job(name);
  auto master = s.master_pod(name);
  auto pod = str(obj(&master, "metadata"), "name");
  if (pod.empty()) throw error(errc::config_error, "run " + name + " has no pod (yet): `fiber ps` says what keeps it pending");
  std::string text, failure;
  bool ended = false;
  s.api.api().stream(
      s.pods_path() + "/" + pod + "/log?container=" + master_container, std::chrono::milliseconds(0), {"get", "pods/log"},
      [&](std::string_view line) { (text += line) += '\n'; },
      [&](std::error_code ec, long, std::string why) {
        ended = true;
        if (ec) failure = std::move(why);
      });
  detail::run_until(s.api.io(), [&] { return ended; });
  if (!failure.empty()) throw error(errc::backend_unavailable, "reading the output of " + pod + ": " + failure);
  return text;
}

std::string kubernetes_runner::dashboard_token(const std::string& name) {
  auto& s = *s_;
  auto r = s.call("GET", "/api/v1/namespaces/" + s.ns + "/secrets/" + run_tokens_name(name), {}, {"get", "secrets"});
  if (r.ec) throw error(errc::backend_unavailable, "run " + name + "'s page token (Secret " + run_tokens_name(name) + "): " + r.why);
  return token_in_secret(r.body, dashboard_token_key);
}

dashboard_route kubernetes_runner::route_to_master(const std::string& name, int port) {
  auto& s = *s_;
  auto master = s.master_pod(name);
  auto pod = str(obj(&master, "metadata"), "name");
  auto phase = str(obj(&master, "status"), "phase");
  if (phase != "Running")
    throw error(errc::config_error, "run " + name + "'s master pod " + pod + " is " + (phase.empty() ? "gone" : phase) +
                                        ", not running: its page is there while it runs");
  // Through the API server's pod proxy, with this user's credentials (pods/proxy, get), as
  // `fiber cp` reaches its helper: no port of the cluster's network is opened to this host.
  auto prefix = s.pods_path() + "/" + pod + ":" + std::to_string(port) + "/proxy";
  return [where = s.api.api().where(), prefix](detail::http_request& req, const std::string& target) {
    where.prepare(req, prefix + target);
  };
}

}  // namespace fiber::cli
