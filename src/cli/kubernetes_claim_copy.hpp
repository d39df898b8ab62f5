// `fiber cp` on Kubernetes: a helper pod mounts the claim and runs a fiber program of the user's
// image as the claim copy service (runtime/claim_copy_service); the command reaches it through the
// API server's pod proxy (`pods/NAME:PORT/proxy/...`), plain HTTPS with the kubeconfig's
// credentials: no exec stream (no WebSocket), no route from here to the pod network, no tar in the
// image. The pod goes when the copy is done, also after a failure.
#pragma once
#include <boost/json/object.hpp>
#include <cstdint>
#include <string>

#include "backend/kubernetes/blocking_api.hpp"
#include "cli/claim_copy.hpp"

namespace fiber::cli {

/// Label of the helper pods (value "cp"); with fiber.user, `fiber gc` finds those left behind.
inline constexpr const char* helper_label = "fiber.helper";

struct helper_pod_settings {
  std::string name, user, image, program, claim, token, pod_patch;
  bool read_only = false;               // a download mounts the claim read-only
  std::uint64_t max_message_bytes = 0;  // the service's bound on one copy
};

/// The helper pod: the claim at /claim, the token Secret (token_secret_manifest, of the pod's
/// name) at /var/run/fiber-cp, the program with FIBER_CLAIM_COPY_PORT/TOKEN_FILE/ROOT, no service
/// account token (it calls no API), restartPolicy Never, the user's kubernetes_pod_patch (pull
/// secrets, node selectors). fiber::error(config_error) for a bad patch.
boost::json::object helper_pod_manifest(const helper_pod_settings& s);
/// The Secret that holds the helper's token, named as the helper pod.
boost::json::object token_secret_manifest(const helper_pod_settings& s);

/// The copy of `plan` through a helper pod in namespace `ns`; `pending_timeout` bounds its start.
/// Returns the number of entries copied; fiber::error naming what failed and what to do.
std::size_t copy_through_helper_pod(detail::kube::blocking_api& api, const std::string& ns, const copy_plan& plan,
                                    helper_pod_settings settings, std::chrono::milliseconds pending_timeout);

}  // namespace fiber::cli
