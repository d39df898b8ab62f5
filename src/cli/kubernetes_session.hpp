// What every verb of `fiber --backend kubernetes` works through: the configuration, the cluster
// as this user reaches it, the namespace, and the API calls the verbs make (list, watch until,
// a run's Job and master pod).
#pragma once
#include <boost/json.hpp>
#include <chrono>
#include <functional>
#include <string>

#include "backend/kubernetes/blocking_api.hpp"
#include "backend/kubernetes/kube_access.hpp"
#include "cli/kubernetes_job.hpp"
#include "cli/kubernetes_runner.hpp"
#include "cli/pod_state.hpp"
#include "cli/run_names.hpp"
#include "fiber/config.hpp"
#include "fiber/error.hpp"
#include "transport/http_client.hpp"
#include "transport/run_until.hpp"

namespace fiber::cli {

struct kubernetes_runner::session {
  fiber::config cfg = fiber::config::load();
  detail::kube::access where = detail::kube::find_access(cfg);
  std::string ns = !cfg.kubernetes_namespace.empty() ? cfg.kubernetes_namespace
                   : !where.namespace_.empty()       ? where.namespace_
                                                     : "default";
  detail::kube::blocking_api api{where};

  std::string pods_path() const { return "/api/v1/namespaces/" + ns + "/pods"; }
  std::string jobs_path() const { return "/apis/batch/v1/namespaces/" + ns + "/jobs"; }

  detail::kube::blocking_api::answer call(const std::string& method, const std::string& path, const std::string& body,
                            detail::kube::verb_on what) {
    return api.call(method, path, body, std::move(what));
  }
  /// A call that must succeed: fiber::error with the server's words (and what to do) otherwise.
  boost::json::value must(const std::string& method, const std::string& path, const std::string& body,
                   detail::kube::verb_on what) {
    auto r = call(method, path, body, std::move(what));
    if (r.ec) throw error(r.status == 0 || r.status == 401 || r.status == 403 ? errc::backend_unavailable : errc::config_error, r.why);
    return std::move(r.body);
  }

  boost::json::array list(const std::string& path, const std::string& selector, detail::kube::verb_on what) {
    auto body = must("GET", path + "?labelSelector=" + detail::percent_encode(selector), {}, std::move(what));
    auto* items = arr(obj(&body), "items");
    return items ? *items : boost::json::array{};
  }

  /// Lists `path?query` until `done(items)` holds, watching from each list's resourceVersion for
  /// the next change (nothing is polled); fiber::error(timeout) saying `what` after `limit`.
  void await(const std::string& path, const std::string& query, const std::function<bool(const boost::json::array&)>& done,
             std::chrono::seconds limit, const std::string& what) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      auto body = must("GET", path + "?" + query, {}, {"list", path.substr(path.rfind('/') + 1)});
      auto* items = arr(obj(&body), "items");
      if (done(items ? *items : boost::json::array{})) return;
      auto left = std::chrono::duration_cast<std::chrono::seconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) throw error(errc::timeout, what);
      bool changed = false;
      auto rv = str(obj(obj(&body), "metadata"), "resourceVersion");
      auto id = api.api().stream(path + "?" + query + "&watch=1&resourceVersion=" + rv +
                                     "&timeoutSeconds=" + std::to_string(std::max<long>(1, left.count())),
                                 left + std::chrono::seconds(10), {"watch", path.substr(path.rfind('/') + 1)},
                                 [&](std::string_view) { changed = true; },
                                 [&](std::error_code, long, const std::string&) { changed = true; });
      detail::run_until(api.io(), [&] { return changed; });
      api.cancel(id);  // completed here: its handlers write this turn's `changed`
    }
  }

  std::string mine() const { return std::string(user_label) + "=" + detail::kube::label_value(user_name()); }

  /// This user's Job of run `name`; fiber::error naming `fiber ps` when none.
  boost::json::object job(const std::string& name) {
    auto r = call("GET", jobs_path() + "/" + name, {}, {"get", "jobs"});
    if (r.status == 404 || (!r.ec && str(obj(obj(&r.body), "metadata"), "name") != name) ||
        (!r.ec && str(obj(obj(obj(&r.body), "metadata"), "labels"), user_label) != detail::kube::label_value(user_name())))
      throw error(errc::config_error, "no run named '" + name + "' of yours in namespace " + ns + " (" + where.server +
                                          "): `fiber ps --backend kubernetes` lists yours");
    if (r.ec) throw error(errc::backend_unavailable, r.why);
    return obj(&r.body) ? *obj(&r.body) : boost::json::object{};
  }

  /// The run's master pod: the newest the Job made (none: an empty object).
  boost::json::object master_pod(const std::string& name) {
    boost::json::object newest;
    for (auto& p : list(pods_path(), "job-name=" + name, {"list", "pods"})) {
      auto* po = obj(&p);
      if (po && str(obj(po, "metadata"), "creationTimestamp") >= str(obj(&newest, "metadata"), "creationTimestamp"))
        newest = *po;
    }
    return newest;
  }
};

}  // namespace fiber::cli
