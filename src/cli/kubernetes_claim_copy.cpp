#include "cli/kubernetes_claim_copy.hpp"

#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>

#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <utility>

#include "backend/kubernetes/pod_manifest.hpp"
#include "backend/kubernetes/pod_watch.hpp"
#include "cli/pod_state.hpp"
#include "core/file_tree.hpp"
#include "fiber/error.hpp"
#include "runtime/claim_copy_service.hpp"
#include "transport/http_client.hpp"
#include "transport/run_until.hpp"

namespace fiber::cli {
namespace json = boost::json;
using detail::kube::blocking_api;

namespace {

constexpr const char* claim_mount = "/claim";
constexpr const char* token_mount = "/var/run/fiber-cp";
constexpr auto ready_limit = std::chrono::seconds(60);      // started → serving
constexpr auto transfer_limit = std::chrono::hours(1);      // one request through the proxy

/// Ctrl-C (or SIGTERM) during a copy: the wait in progress ends, and the helper pod still goes.
struct interruption {
  bool requested = false;
  void check() const {
    if (requested) throw error(errc::closed, "fiber cp was interrupted; its helper pod is removed");
  }
};

/// Runs `api`'s loop until `done` holds or the copy is interrupted.
void run_until_done(blocking_api& api, const bool& done, const interruption& stop) {
  detail::run_until(api.io(), [&] { return done || stop.requested; });
}

/// The pod has started its container; fiber::error with Kubernetes' words when it cannot.
void await_start(blocking_api& api, const std::string& ns, const std::string& pod, std::chrono::milliseconds limit,
                 const interruption& stop) {
  std::string failure;
  bool done = false;
  auto finish = [&](std::string why) {
    if (done) return;
    failure = std::move(why);
    done = true;
  };
  auto watch = std::make_shared<detail::kube::pod_watch>(api.io(), api.api(), ns, std::string(helper_label) + "=cp");
  watch->follow(pod, [&](const json::object* p, const std::string& problem) {
    if (!problem.empty()) return finish("watching it failed: " + problem);
    if (!p) return finish("it was deleted before it started");
    auto st = state_of(*p);
    if (st.started) return finish({});
    if (st.hopeless) return finish("it cannot start: " + st.reason);
    if (st.unschedulable) return finish("Kubernetes cannot schedule it: " + st.reason.substr(15));
  });
  asio::steady_timer timer(api.io(), limit);
  timer.async_wait([&](std::error_code ec) {
    if (!ec) finish("it did not start in " + std::to_string(limit.count() / 1000) + " s (kubernetes_pending_timeout_ms)");
  });
  asio::post(api.io(), [watch] { watch->start(); });
  run_until_done(api, done, stop);
  watch->stop();
  timer.cancel();
  detail::run_ready(api.io());
  stop.check();
  if (!failure.empty())
    throw error(errc::spawn_failed, "fiber cp's helper pod " + pod + ": " + failure +
                                        " (it runs the image and fiber program of --image and --program, by default "
                                        "your newest run's)");
}

/// The service's ready line in the pod's log; fiber::error with what the program said otherwise.
void await_serving(blocking_api& api, const std::string& ns, const std::string& pod, const std::string& program,
                   const interruption& stop) {
  bool ready = false, ended = false;
  std::string said, why;
  auto id = api.api().stream(
      "/api/v1/namespaces/" + ns + "/pods/" + pod + "/log?follow=true", ready_limit, {"get", "pods/log"},
      [&](std::string_view line) {
        if (line.starts_with(detail::claim_copy_ready_line)) ready = true;
        else if (said.size() < 2000) said.append(line).append("\n");
      },
      [&](std::error_code ec, long, std::string w) {
        ended = true;
        if (ec) why = std::move(w);
      });
  detail::run_until(api.io(), [&] { return ready || ended || stop.requested; });
  api.cancel(id);
  stop.check();
  if (ready) return;
  throw error(errc::spawn_failed,
              "fiber cp's helper pod " + pod + " runs " + program + ", which did not serve the claim" +
                  (why.empty() ? "" : " (" + why + ")") + (said.empty() ? ": " : "; it printed:\n" + said) +
                  "--program must be a fiber program whose main calls fiber::init first (as every fiber program's "
                  "must), in the image of --image");
}

struct proxied {
  long status = 0;
  std::string body, content_type;
};

/// One request to the helper through the API server's pod proxy.
proxied through_proxy(blocking_api& api, const std::string& ns, const std::string& pod, const std::string& method,
                      const std::string& in_claim, const std::string& token, std::string body,
                      const interruption& stop) {
  detail::http_request req;
  req.method = method;
  req.timeout = transfer_limit;
  api.api().where().prepare(req, "/api/v1/namespaces/" + ns + "/pods/" + pod + ":" +
                                     std::to_string(detail::claim_copy_port) +
                                     "/proxy/tree?path=" + detail::percent_encode(in_claim));
  req.headers.emplace_back(detail::claim_copy_token_header, token);
  if (method == "PUT") {
    req.headers.emplace_back("Content-Type", "application/octet-stream");
    req.body = std::move(body);
  }
  detail::http_client http(api.io());
  std::optional<proxied> out;
  std::string failure;
  http.start(std::move(req), [&](std::error_code ec, detail::http_response r) {
    if (ec) failure = ec.message();
    out = proxied{r.status, std::move(r.body), r.header("content-type")};
  });
  detail::run_until(api.io(), [&] { return out.has_value() || stop.requested; });
  stop.check();
  if (!out || !failure.empty())
    throw error(errc::backend_unavailable, "the Kubernetes API server at " + api.api().where().server +
                                               " did not carry fiber cp's request to its helper pod (" +
                                               (failure.empty() ? "no answer" : failure) + ")");
  return std::move(*out);
}

/// A refusal in the helper's words, or in the API server's (a `Status`) with what to do.
[[noreturn]] void refused(const proxied& r, const std::string& pod, const std::string& server) {
  std::string said = r.body;
  while (!said.empty() && (said.back() == '\n' || said.back() == '\r')) said.pop_back();
  if (r.content_type.starts_with("application/json")) {
    boost::system::error_code ec;
    auto status = json::parse(r.body, ec);
    said = ec ? said : detail::kube::status_message(status);
    if (r.status == 403)
      throw error(errc::backend_unavailable,
                  "the Kubernetes API server at " + server + " forbids reaching pod " + pod + " through its proxy: " +
                      said + ". fiber cp needs pods/proxy (get to copy out, update to copy in) besides pods (create, "
                      "get, watch, delete): bind the Role fiber-command of containers/kubernetes/rbac.yaml to you");
    throw error(errc::backend_unavailable, "the Kubernetes API server at " + server + " could not reach fiber cp's helper pod " +
                                               pod + " (HTTP " + std::to_string(r.status) + "): " + said);
  }
  auto code = r.status == 413 ? errc::message_too_large : errc::config_error;
  throw error(code, "fiber cp: " + said);
}

std::string random_hex(std::size_t bytes) {
  std::random_device rd;
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < bytes; ++i) {
    auto b = rd() & 0xff;
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

}  // namespace

json::object token_secret_manifest(const helper_pod_settings& s) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata",
           {{"name", s.name}, {"labels", {{helper_label, "cp"}, {"fiber.user", detail::kube::label_value(s.user)}}}}},
          {"type", "Opaque"},
          {"stringData", {{"token", s.token}}}};
}

json::object helper_pod_manifest(const helper_pod_settings& s) {
  json::array env{
      json::object{{"name", detail::env_claim_copy_port}, {"value", std::to_string(detail::claim_copy_port)}},
      json::object{{"name", detail::env_claim_copy_token_file}, {"value", std::string(token_mount) + "/token"}},
      json::object{{"name", detail::env_claim_copy_root}, {"value", detail::kube::kube_literal(claim_mount)}},
  };
  if (s.max_message_bytes)
    env.push_back(json::object{{"name", "FIBER_MAX_MESSAGE_BYTES"}, {"value", std::to_string(s.max_message_bytes)}});
  json::object container{
      {"name", "copy"},
      {"image", s.image},
      {"command", json::array{json::value(detail::kube::kube_literal(s.program))}},
      {"env", std::move(env)},
      {"ports", json::array{json::object{{"name", "copy"}, {"containerPort", detail::claim_copy_port}}}},
      {"volumeMounts", json::array{json::object{{"name", "claim"}, {"mountPath", claim_mount}, {"readOnly", s.read_only}},
                                   json::object{{"name", "token"}, {"mountPath", token_mount}, {"readOnly", true}}}},
  };
  json::value pod = json::object{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", s.name},
        {"labels", {{helper_label, "cp"}, {"fiber.user", detail::kube::label_value(s.user)}}}}},
      {"spec",
       {{"restartPolicy", "Never"},
        {"automountServiceAccountToken", false},
        {"terminationGracePeriodSeconds", 1},
        {"containers", json::array{std::move(container)}},
        {"volumes", json::array{json::object{{"name", "claim"},
                                             {"persistentVolumeClaim", {{"claimName", s.claim}, {"readOnly", s.read_only}}}},
                                json::object{{"name", "token"},
                                             {"secret", {{"secretName", s.name}, {"defaultMode", 0444}}}}}}}},
  };
  if (!s.pod_patch.empty()) {
    boost::system::error_code ec;
    auto patch = json::parse(s.pod_patch, ec);
    if (ec || !patch.is_object())
      throw error(errc::config_error, "config key 'kubernetes_pod_patch': not a JSON object; write a JSON merge patch "
                                      "such as {\"spec\":{\"nodeSelector\":{...}}}");
    detail::kube::merge_patch(pod, patch);
  }
  return pod.as_object();
}

std::size_t copy_through_helper_pod(blocking_api& api, const std::string& ns, const copy_plan& plan,
                                    helper_pod_settings s, std::chrono::milliseconds pending_timeout) {
  std::string packed;
  if (plan.upload) packed = detail::pack_tree(plan.local, s.max_message_bytes);  // before anything is made
  s.name = "fiber-cp-" + random_hex(4);
  s.token = random_hex(32);
  s.claim = plan.claim;
  s.read_only = !plan.upload;
  auto pods = "/api/v1/namespaces/" + ns + "/pods";
  // From here a Ctrl-C ends the copy, not the command: the helper pod must go.
  interruption stop;
  asio::signal_set signals(api.io(), SIGINT, SIGTERM);
  signals.async_wait([&](std::error_code ec, int) { stop.requested = !ec; });
  struct removed_at_end {
    blocking_api& api;
    std::string path, resource;
    ~removed_at_end() {
      if (!path.empty()) api.call("DELETE", path, R"({"gracePeriodSeconds":0})", {"delete", resource});
    }
  };
  // The token in a Secret of the helper's name, mounted in its pod: a reader of the namespace sees
  // the pod's spec, not the Secret, and cannot reach the helper around the API server's proxy.
  auto secrets = "/api/v1/namespaces/" + ns + "/secrets";
  auto kept = api.call("POST", secrets, json::serialize(token_secret_manifest(s)), {"create", "secrets"});
  if (kept.ec) throw error(errc::backend_unavailable, "fiber cp's token for its helper pod: " + kept.why);
  removed_at_end token{api, secrets + "/" + s.name, "secrets"};
  auto created = api.call("POST", pods + "?fieldValidation=Strict", json::serialize(helper_pod_manifest(s)),
                          {"create", "pods"});
  if (created.ec) throw error(errc::backend_unavailable, "fiber cp's helper pod: " + created.why);
  removed_at_end helper{api, pods + "/" + s.name, "pods"};

  await_start(api, ns, s.name, pending_timeout, stop);
  await_serving(api, ns, s.name, s.program, stop);
  auto& server = api.api().where().server;
  if (plan.upload) {
    auto size = packed.size();
    auto r = through_proxy(api, ns, s.name, "PUT", plan.in_claim, s.token, std::move(packed), stop);
    if (r.status != 200) refused(r, s.name, server);
    auto n = static_cast<std::size_t>(std::strtoull(r.body.c_str(), nullptr, 10));
    std::fprintf(stderr, "fiber: copied %zu %s (%zu bytes packed) into %s:/%s\n", n, n == 1 ? "entry" : "entries", size,
                 plan.claim.c_str(), plan.in_claim.c_str());
    return n;
  }
  auto r = through_proxy(api, ns, s.name, "GET", plan.in_claim, s.token, {}, stop);
  if (r.status == 404 && !r.content_type.starts_with("application/json"))
    throw error(errc::config_error, "claim " + plan.claim + " has no '" + plan.in_claim + "': `fiber cp " + plan.claim +
                                        ":/ DIR` copies all of it");
  if (r.status != 200) refused(r, s.name, server);
  std::error_code ec;
  std::filesystem::create_directories(plan.local_parent, ec);
  auto n = detail::unpack_tree(r.body, plan.local_parent, plan.local_name);
  std::fprintf(stderr, "fiber: copied %zu %s (%zu bytes packed) to %s\n", n, n == 1 ? "entry" : "entries", r.body.size(),
               (plan.local_parent / plan.local_name).c_str());
  return n;
}

}  // namespace fiber::cli
