// A master's pods: what they share (the API clients, the creator, the watch, the settings), the
// creator that posts them on a thread of its own, and the start of one pod as a child (its life,
// pod_run, is in pod_run.cpp). The kubernetes backend (kubernetes_backend.cpp) makes these.
#pragma once
#include <boost/json/object.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "backend/engine_run.hpp"
#include "backend/kubernetes/blocking_api.hpp"
#include "backend/kubernetes/kube_api.hpp"
#include "backend/kubernetes/pod_manifest.hpp"
#include "backend/kubernetes/pod_watch.hpp"
#include "backend/side_thread.hpp"
#include "fiber/config.hpp"

namespace fiber::detail::kube {

/// Exit code of a child whose pod never ran.
inline constexpr int not_started = 255;

const boost::json::object* object_at(const boost::json::object& o, std::string_view key);
std::string string_at(const boost::json::object* o, std::string_view key);
/// A DELETE's body: `grace_seconds` for the kubelet, what the pod owns removed in the background.
std::string delete_body(int grace_seconds);

/// A pod create's answer, given on the creator's thread and read on the loop's (or by a caller
/// that must know whether the pod exists before it can delete it).
struct pod_created {
  std::error_code ec;
  long status = 0;
  std::string why;
};
using pending_create = one_answer<pod_created>;

/// Creates pods on a thread of its own, rate-limited and several at once: the caller's loop never
/// waits for the API server, and a child killed while its pod is being created can wait for the
/// answer and delete the pod (a killed child is a deleted pod, always).
class pod_creator {
 public:
  pod_creator(const access& where, double qps, int burst) : api_(thread_.io(), where, qps, burst) {}
  ~pod_creator() { thread_.finish(); }  // creates in flight and queued finish while the client exists

  /// `answered` runs on the creator's thread once `pending` is set.
  void create(std::string path, std::string body, std::shared_ptr<pending_create> pending,
              unique_function<void()> answered) {
    asio::post(thread_.io(), [this, path = std::move(path), body = std::move(body), pending = std::move(pending),
                              answered = std::move(answered)]() mutable {
      api_.call(
          "POST", std::move(path), std::move(body), {"create", "pods"},
          [pending, answered = std::move(answered)](std::error_code ec, long status, const boost::json::value&, std::string why) mutable {
            pending->set({ec, status, std::move(why)});
            answered();
          },
          /*limited=*/true);
    });
  }

 private:
  side_thread thread_;
  api api_;
};

/// What every pod of one master shares.
struct pods_shared {
  asio::io_context& io;
  fiber::config cfg;
  std::string ns, job_id;
  std::unique_ptr<api> client;
  std::unique_ptr<pod_creator> creator;
  std::shared_ptr<pod_watch> watch;
  std::shared_ptr<blocking_api> blocking;
  pod_settings settings;
};

/// Starts the pod `pod` (from `manifest`) of child `process`: its create goes to the creator now,
/// and the watch follows it once the loop runs. `asked` says what it asked for, in the words of a
/// pod that cannot be scheduled; `memory_limit_mb`, its container's memory limit (0: none), is
/// what an OOM kill says it went past.
std::shared_ptr<engine_run> start_pod(std::shared_ptr<pods_shared> shared, std::string process, std::string pod,
                                      std::string asked, const boost::json::object& manifest,
                                      std::uint64_t memory_limit_mb);

/// Follows pod `pod`, which an earlier master made and runs (relabelled as this master's job), as a
/// child: its end and its output from now on.
std::shared_ptr<engine_run> adopt_pod(std::shared_ptr<pods_shared> shared, const std::string& pod);

}  // namespace fiber::detail::kube
