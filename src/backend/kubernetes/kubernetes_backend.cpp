// Kubernetes backend: every child is a pod of the configured image running this program with the
// worker flag. One watch per master follows every pod of the job; a pod that cannot run (image,
// scheduling, configuration) fails its child's start with Kubernetes' own reason; pods are
// deleted when they end, when they are killed and when the master's context ends, and the pods
// of a master that runs in a pod are owned by that pod.
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <unistd.h>

#include <atomic>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cerrno>
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/volume.hpp"
#include "backend/backend.hpp"
#include "backend/engine_run.hpp"
#include "backend/kubernetes/blocking_api.hpp"
#include "backend/kubernetes/keys_secret.hpp"
#include "backend/kubernetes/kube_api.hpp"
#include "backend/kubernetes/node_list.hpp"
#include "backend/kubernetes/pod_manifest.hpp"
#include "backend/kubernetes/pod_run.hpp"
#include "backend/kubernetes/pod_watch.hpp"
#include "backend/side_thread.hpp"
#include "core/log.hpp"
#include "core/worker_env.hpp"
#include "fiber/config.hpp"
#include "fiber/error.hpp"

namespace fiber::detail {
namespace {

using namespace kube;

class kubernetes_backend final : public tcp_backend {
 public:
  kubernetes_backend(asio::io_context& io, const fiber::config& cfg, std::string job_id)
      : job_id_(std::move(job_id)) {
    if (cfg.image.empty())
      throw error(errc::config_error,
                  "backend=kubernetes needs an image: set the config key 'image' (FIBER_IMAGE) to an image the "
                  "cluster can pull that holds this program at the same path");
    auto where = find_access(cfg);
    shared_ = std::make_shared<pods_shared>(pods_shared{io, cfg, {}, job_id_, nullptr, nullptr, nullptr, nullptr, {}});
    auto& s = *shared_;
    s.ns = !cfg.kubernetes_namespace.empty() ? cfg.kubernetes_namespace
           : !where.namespace_.empty()       ? where.namespace_
                                             : "default";
    s.settings.image = cfg.image;
    s.settings.gpu_resource = cfg.kubernetes_gpu_resource;
    s.settings.service_account = cfg.kubernetes_service_account;
    s.settings.cpu_request = cfg.kubernetes_cpu_request;
    s.settings.volumes = parse_volumes(cfg.volumes);
    // An eviction, a drain or a deletion by anyone but fiber (which names its own grace) gives a
    // pod this long after its SIGTERM: the notice a pool worker hands its work back in.
    s.settings.grace_seconds = (std::max(cfg.terminate_grace_ms, cfg.drain_notice_ms) + 999) / 1000;
    s.settings.durable = workers_wait_for_next_master(cfg);
    if (!cfg.kubernetes_pod_patch.empty()) {
      boost::system::error_code ec;
      s.settings.patch = boost::json::parse(cfg.kubernetes_pod_patch, ec);
      if (ec || !s.settings.patch.is_object())
        throw error(errc::config_error, "config key 'kubernetes_pod_patch': not a JSON object (" +
                                            (ec ? ec.message() : std::string("another JSON value")) +
                                            "); write a JSON merge patch such as {\"spec\":{\"nodeSelector\":{...}}}");
    }
    if (where.in_cluster) {
      // The master runs in a pod: it listens on the pod's IP, and its workers are its dependents.
      auto ip = env_or_empty("FIBER_POD_IP");
      if (ip.empty() && cfg.master_address.empty())
        throw error(errc::config_error,
                    "this master runs in a Kubernetes pod but does not know the pod's IP: give the pod the "
                    "environment variable FIBER_POD_IP from the downward API (valueFrom.fieldRef.fieldPath: "
                    "status.podIP), or set the config key 'master_address'");
      bind_host_ = advertise_host_ = cfg.master_address.empty() ? ip : cfg.master_address;
      if (!cfg.master_address.empty()) bind_host_ = "0.0.0.0";
      auto pod = env_or_empty("FIBER_POD_NAME"), uid = env_or_empty("FIBER_POD_UID");
      if (!pod.empty() && !uid.empty()) s.settings.owner = owner_pod{pod, uid};
    } else {
      if (cfg.master_address.empty())
        throw error(errc::config_error,
                    "backend=kubernetes with the master outside the cluster needs the config key 'master_address' "
                    "(FIBER_MASTER_ADDRESS): an address of this machine that pods can reach (or run the master in "
                    "a pod: fiber run)");
      advertise_host_ = cfg.master_address;
      bind_host_ = "0.0.0.0";
    }
    // In a pod too: a master that dies while its pod lives on (a shell in a dev pod, a crashed
    // process under a supervisor) leaves workers that no owner reference removes.
    s.settings.master_mark = master_mark();
    s.blocking = std::make_shared<blocking_api>(where);
    secrets_ = std::make_unique<keys_secrets>(s.blocking, s.ns, job_id_);
    // First contact: the server answers, the credentials hold, and listing pods is allowed.
    auto first = s.blocking->call("GET",
                                  "/api/v1/namespaces/" + s.ns + "/pods?limit=1&labelSelector=" +
                                      percent_encode(std::string(managed_by_label) + "=fiber"),
                                  {}, {"list", "pods"});
    if (first.ec) throw error(errc::backend_unavailable, first.why);
    remove_orphans(*s.blocking);
    load_nodes();
    s.client = std::make_unique<api>(io, where, cfg.kubernetes_qps, cfg.kubernetes_burst);
    s.creator = std::make_unique<pod_creator>(where, cfg.kubernetes_qps, cfg.kubernetes_burst);
    s.watch = std::make_shared<pod_watch>(io, *s.client, s.ns, std::string(job_label) + "=" + label_value(job_id_));
    asio::post(io, [watch = s.watch] { watch->start(); });
    logf(log_level::debug, "kubernetes backend: namespace ", s.ns, " through ", where.source);
  }

  ~kubernetes_backend() override {
    auto& s = *shared_;
    s.creator.reset();  // creates in flight finish
    s.watch->stop();
    // Whatever this master started and did not see deleted goes now, running or not.
    auto r = s.blocking->call("DELETE",
                              "/api/v1/namespaces/" + s.ns + "/pods?labelSelector=" +
                                  percent_encode(std::string(job_label) + "=" + label_value(job_id_)),
                              delete_body(0), {"deletecollection", "pods"});
    if (r.ec) logf(log_level::warn, "could not delete the pods of job ", job_id_, ": ", r.why);
    secrets_.reset();  // after the pods that mount them
    for (auto& secret : adopted_secrets_) {  // the credentials of the pods taken up, made by their master
      auto gone = s.blocking->call("DELETE", "/api/v1/namespaces/" + s.ns + "/secrets/" + secret, delete_body(0),
                                   {"delete", "secrets"});
      if (gone.ec && gone.status != 404) logf(log_level::warn, "could not delete Secret ", secret, ": ", gone.why);
    }
  }

  std::string name() const override { return "kubernetes"; }

  void check_capacity(const spawn_spec& spec) const override {
    // With an autoscaler, a node that fits may yet come: the pending timeout bounds the wait.
    if (shared_->cfg.kubernetes_autoscaling || !nodes_) return;
    room_words words{"the " + std::to_string(nodes_->size()) + " schedulable nodes of the cluster (allocatable)",
                     shared_->settings.gpu_resource, "add a node that has it (or set kubernetes_autoscaling=true)"};
    try {
      check_rooms(*nodes_, spec, words);
    } catch (const error&) {
      load_nodes();  // nodes come and go: look again before saying no
      if (!nodes_) return;
      words.where = "the " + std::to_string(nodes_->size()) + " schedulable nodes of the cluster (allocatable)";
      check_rooms(*nodes_, spec, words);
    }
  }

  std::unique_ptr<job> spawn(const spawn_spec& given) override {
    auto& spec = given;
    auto keys = spec.secret.empty() ? std::string() : secrets_->name_for(spec.secret, shared_->settings);
    auto pod = pod_name(job_id_, ++spawned_, spec.name);
    auto manifest = pod_manifest(shared_->settings, spec, pod, job_id_, keys);
    logf(log_level::debug, "starting ", spec.name, " as pod ", pod, " of ", shared_->settings.image);
    auto asked = "cpu " + std::to_string(spec.cpu) +
                 (shared_->settings.cpu_request.empty() ? "" : " (requests " + shared_->settings.cpu_request + ")") +
                 (spec.memory_mb ? ", memory " + std::to_string(spec.memory_mb) + "Mi" : "") +
                 (spec.gpu ? ", " + std::to_string(spec.gpu) + " " + shared_->settings.gpu_resource : "");
    auto run = start_pod(shared_, spec.name, pod, std::move(asked), manifest,
                         static_cast<std::uint64_t>(std::max(spec.memory_mb, 0)));
    return std::make_unique<job>(std::move(run));
  }

  /// A pod an earlier master of the run made: relabelled as this master's job (its watch follows
  /// it, its end deletes it, a later master's sweep reads this master's mark on it).
  std::unique_ptr<job> adopt(const std::string& handle) override {
    auto& s = *shared_;
    if (handle.empty() || handle.size() > 253 || handle.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-.") != std::string::npos)
      throw error(errc::spawn_failed, "'" + handle + "' is not a pod's name");
    // Only a durable run's worker: a journal naming another pod does not make this master follow,
    // and at its end delete, something that is not fiber's.
    auto seen = s.blocking->call("GET", "/api/v1/namespaces/" + s.ns + "/pods/" + handle, {}, {"get", "pods"});
    if (seen.ec) throw error(errc::spawn_failed, "its pod " + handle + " cannot be read: " + seen.why);
    auto* meta = seen.body.is_object() ? object_at(seen.body.as_object(), "metadata") : nullptr;
    auto* labels = meta ? object_at(*meta, "labels") : nullptr;
    if (string_at(labels, managed_by_label) != "fiber" || string_at(labels, durable_label) != "true")
      throw error(errc::spawn_failed, "pod " + handle + " is not a durable run's worker");
    boost::json::object patch{
        {"metadata", boost::json::object{{"labels", boost::json::object{{job_label, label_value(job_id_)}}},
                                         {"annotations", boost::json::object{{master_annotation, s.settings.master_mark}}}}}};
    auto r = s.blocking->call("PATCH", "/api/v1/namespaces/" + s.ns + "/pods/" + handle, boost::json::serialize(patch),
                              {"patch", "pods"});
    if (r.ec) throw error(errc::spawn_failed, "its pod " + handle + " cannot be taken up: " + r.why);
    auto* status = r.body.is_object() ? object_at(r.body.as_object(), "status") : nullptr;
    if (string_at(status, "phase") != "Running") throw error(errc::spawn_failed, "its pod " + handle + " no longer runs");
    for (auto& secret : mounted_secrets(r.body.as_object())) adopted_secrets_.insert(secret);
    return std::make_unique<job>(adopt_pod(shared_, handle));
  }

 private:
  /// The fiber Secrets (a job's credentials) pod `item` mounts.
  static std::vector<std::string> mounted_secrets(const boost::json::object& item) {
    std::vector<std::string> out;
    auto* spec = object_at(item, "spec");
    auto* volumes = spec ? spec->if_contains("volumes") : nullptr;
    for (auto& v : volumes && volumes->is_array() ? volumes->as_array() : boost::json::array{}) {
      auto secret = v.is_object() ? string_at(object_at(v.as_object(), "secret"), "secretName") : std::string();
      if (secret.starts_with("fiber-")) out.push_back(secret);
    }
    return out;
  }

  /// Pods of masters on this machine (this pod, when the master runs in one) that are gone (killed
  /// before they could clean up).
  void remove_orphans(blocking_api& b) {
    auto& s = *shared_;
    auto r = b.call("GET",
                    "/api/v1/namespaces/" + s.ns + "/pods?labelSelector=" +
                        percent_encode(std::string(managed_by_label) + "=fiber"),
                    {}, {"list", "pods"});
    if (r.ec || !r.body.is_object()) return;
    auto prefix = this_host() + ":";
    std::set<std::string> left_secrets;
    auto* items = r.body.as_object().if_contains("items");
    if (!items || !items->is_array()) return;
    for (auto& item : items->as_array()) {
      if (!item.is_object()) continue;
      auto* meta = object_at(item.as_object(), "metadata");
      // A durable run's worker waits for its run's next master, and ends on its own.
      if (!string_at(meta ? object_at(*meta, "labels") : nullptr, durable_label).empty() &&
          string_at(object_at(item.as_object(), "status"), "phase") == "Running")
        continue;
      auto owner = string_at(meta ? object_at(*meta, "annotations") : nullptr, master_annotation);
      if (!owner.starts_with(prefix)) continue;
      int pid = std::atoi(owner.c_str() + prefix.size());
      if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
      auto name = string_at(meta, "name");
      logf(log_level::info, "deleting pod ", name, ", left by a fiber master that ended without cleanup");
      b.call("DELETE", "/api/v1/namespaces/" + s.ns + "/pods/" + name, delete_body(0), {"delete", "pods"});
      // ... and the Secret with its credentials (several pods name the same: one delete does).
      for (auto& secret : mounted_secrets(item.as_object()))
        if (left_secrets.insert(secret).second)
          b.call("DELETE", "/api/v1/namespaces/" + s.ns + "/secrets/" + secret, delete_body(0), {"delete", "secrets"});
    }
  }

  /// What each node can give a pod, for check_capacity. Left unknown without the right to list
  /// nodes (a namespaced Role): the scheduler's refusal (Unschedulable) fails the start then.
  void load_nodes() const {
    auto r = shared_->blocking->call("GET", "/api/v1/nodes", {}, {"list", "nodes"});
    if (r.ec) {
      if (!nodes_unknown_logged_)
        logf(log_level::info, "kubernetes backend: cannot list nodes (", r.why,
             "); requests are checked by the scheduler alone");
      nodes_unknown_logged_ = true;
      nodes_.reset();
      return;
    }
    nodes_ = node_rooms(r.body, shared_->settings.gpu_resource);
  }

  std::string job_id_;
  std::shared_ptr<pods_shared> shared_;
  mutable std::optional<std::vector<node_room>> nodes_;
  mutable bool nodes_unknown_logged_ = false;
  std::uint64_t spawned_ = 0;
  std::unique_ptr<keys_secrets> secrets_;
  std::set<std::string> adopted_secrets_;
};

}  // namespace

std::unique_ptr<backend> make_kubernetes_backend(asio::io_context& io, const fiber::config& cfg,
                                                 const std::string& job_id) {
  return std::make_unique<kubernetes_backend>(io, cfg, job_id);
}

}  // namespace fiber::detail
