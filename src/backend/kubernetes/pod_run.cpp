// One pod's life as a child: created through the creator, followed through the master's watch,
// its output followed, signalled the way Kubernetes stops pods, and deleted when it ends.
#include "backend/kubernetes/pod_run.hpp"

#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <atomic>
#include <boost/json/serialize.hpp>
#include <csignal>
#include <ctime>
#include <optional>

#include "backend/kubernetes/node_taints.hpp"
#include "core/log.hpp"
#include "fiber/error.hpp"

namespace fiber::detail::kube {


const boost::json::object* object_at(const boost::json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_object() ? &v->as_object() : nullptr;
}
std::string string_at(const boost::json::object* o, std::string_view key) {
  if (!o) return {};
  auto* v = o->if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

std::string delete_body(int grace_seconds) {
  return boost::json::serialize(boost::json::object{{"kind", "DeleteOptions"},
                                                    {"apiVersion", "v1"},
                                                    {"gracePeriodSeconds", grace_seconds},
                                                    {"propagationPolicy", "Background"}});
}

namespace {

/// One pod's life.
struct pod_run final : engine_run, std::enable_shared_from_this<pod_run> {
  enum class stage { creating, pending, running, ended };

  std::shared_ptr<pods_shared> shared;
  std::string process_name, name, asked;
  std::atomic<stage> at = stage::creating;
  bool created = false, deleting = false, logs_open = false;
  bool stopping = false;  // fiber has asked Kubernetes to stop the pod (signal SIGTERM or SIGKILL)
  bool forced = false;    // ... and removed it at once (grace 0), without waiting for the kubelet's report
  int pending_signal = 0;
  int code = 0;
  std::string detail, last_reason, output_tail;
  std::string failing;  // why fail() is deleting the pod
  std::string logs_since;  // a pod taken up: its output from this time on (RFC 3339)
  std::atomic<bool> unschedulable{false};  // the scheduler refused it and no autoscaler may help
  bool taints_asked = false;               // the nodes' taints are being listed
  std::optional<int> terminated_code;
  std::atomic<bool> reaped{false};
  asio::steady_timer pending_timer, logs_grace, kill_deadline;
  std::uint64_t logs_stream = 0;
  std::uint64_t memory_limit_mb = 0;  // its container's limit; 0: none
  std::shared_ptr<pending_create> create_answer = std::make_shared<pending_create>();

  // A pod may wait for a node (when_running); its pid is what the child reports from inside it.
  pod_run(std::shared_ptr<pods_shared> s, std::string process, std::string pod)
      : engine_run({.queued = true, .identified_later = false}),
        shared(std::move(s)), process_name(std::move(process)), name(std::move(pod)), pending_timer(shared->io),
        logs_grace(shared->io), kill_deadline(shared->io) {}

  std::string path() const { return "/api/v1/namespaces/" + shared->ns + "/pods/" + name; }

  bool never_fits() const noexcept override { return unschedulable.load(); }
  std::string handle() const override { return name; }
  std::string pending_reason() const override {
    if (at == stage::creating) return "its pod " + name + " is being created";
    if (at != stage::pending) return {};
    return "its pod " + name + " is pending" + (last_reason.empty() ? "" : ": " + last_reason);
  }
  void signal(int sig) noexcept override {
    asio::post(shared->io, [self = shared_from_this(), sig] { self->signal_now(sig); });
  }
  void kill_and_reap() noexcept override;

  /// Hands the create to the creator at once, on the caller's thread: a kill right after the
  /// start waits for the create's answer, and must never wait for a create still queued behind
  /// it on the loop (pool.terminate() right after a spawn did, for good).
  void submit(const boost::json::object& manifest);

  /// On the loop: follows the pod through the watch (which hands over what it has already seen).
  void follow();
  /// The scheduler refused it for good: the start fails.
  void never_schedulable(const std::string& message);
  /// The scheduler refused it for taints: fails for lasting ones, waits through passing ones.
  void check_taints(const std::string& message, const boost::json::object* spec);

  void create_answered() {
    auto& a = create_answer->wait();  // set already: this runs after the answer
    // 409: a create that was retried after the answer was lost made it the first time.
    if (a.ec && a.status != 409) return end(not_started, "Kubernetes could not create its pod: " + a.why);
    if (at == stage::ended) return;  // killed meanwhile: kill_and_reap deleted it
    created = true;
    if (at == stage::creating) at = stage::pending;
    if (pending_signal) signal_now(pending_signal);
  }

  void changed(const boost::json::object* pod, const std::string& problem);

  void running() {
    if (at == stage::running || at == stage::ended) return;
    at = stage::running;
    pending_timer.cancel();
    logf(log_level::debug, process_name, ": pod ", name, " runs");
    follow_logs();
    mark_running();
  }

  /// The pod's output goes where a local child's would: this process's stdout.
  void follow_logs();

  void terminated_now(const boost::json::object& t);

  void finish();

  void fail(std::string why) {
    logf(log_level::debug, process_name, ": ", why);
    failing = why;  // the watch may see the pod gone before the delete is answered: this is why
    remove_then(0, [self = shared_from_this(), why = std::move(why)]() mutable { self->end(not_started, std::move(why)); });
  }

  void end(int exit_code, std::string why);

  /// Deletes the pod (once it exists; a create still in flight deletes it when answered).
  void remove(int grace_seconds) {
    remove_then(grace_seconds, [] {});
  }
  /// ... and then runs `next`: a child has ended once its pod is on its way out.
  void remove_then(int grace_seconds, unique_function<void()> next);

  void signal_now(int sig);
};

void pod_run::kill_and_reap() noexcept {
  if (at == stage::ended || reaped.exchange(true)) return;
  // Reaped means gone: deleted now, whether or not the loop runs again (a create in flight is
  // waited for first).
  asio::post(shared->io, [self = shared_from_this()] {
    self->forget_waiters();  // the caller reports the kill itself
    self->end(-SIGKILL, {});
  });
  auto& made = create_answer->wait();
  if (made.ec && made.status != 409) return;  // never created
  auto r = shared->blocking->call("DELETE", path(), delete_body(0), {"delete", "pods"});
  if (r.ec && r.status != 404) logf(log_level::warn, "could not delete pod ", name, ": ", r.why);
}

void pod_run::submit(const boost::json::object& manifest) {
  std::weak_ptr<pod_run> weak = weak_from_this();
  // fieldValidation=Strict: a field the server does not know is an error, never silently dropped.
  shared->creator->create("/api/v1/namespaces/" + shared->ns + "/pods?fieldValidation=Strict",
                          boost::json::serialize(manifest), create_answer, [weak, &io = shared->io] {
                            asio::post(io, [weak] {
                              if (auto self = weak.lock()) self->create_answered();
                            });
                          });
}

void pod_run::follow() {
  if (at == stage::ended) return;  // killed before the loop got here
  std::weak_ptr<pod_run> weak = weak_from_this();
  shared->watch->follow(name, [weak](const boost::json::object* pod, const std::string& problem) {
    if (auto self = weak.lock()) self->changed(pod, problem);
  });
  pending_timer.expires_after(std::chrono::milliseconds(shared->cfg.kubernetes_pending_timeout_ms));
  pending_timer.async_wait([weak](std::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->at == stage::running || self->at == stage::ended) return;
    self->fail("its pod " + self->name + " was still not running after kubernetes_pending_timeout_ms=" +
               std::to_string(self->shared->cfg.kubernetes_pending_timeout_ms) +
               (self->last_reason.empty() ? std::string() : " (" + self->last_reason + ")"));
  });
}

void pod_run::changed(const boost::json::object* pod, const std::string& problem) {
  if (at == stage::ended) return;
  if (!problem.empty()) return fail("the pod watch stopped: " + problem);
  if (!pod) {
    if (!created) return;  // the watch saw it vanish before our create was answered: not ours yet
    // Deleted because it cannot start (unschedulable, its image cannot be pulled): a failed
    // start, not a child killed from outside (a pool would start another at once, and again).
    if (!failing.empty()) return end(not_started, failing);
    // Deleted from outside (kubectl delete pod, a node drained) before it ended.
    if (!terminated_code && !forced)
      logf(log_level::warn, process_name, ": its pod ", name, " was deleted before Kubernetes reported how its container ",
           "ended", deleting ? " (fiber was stopping it)" : "", ": reported as killed (-9)");
    return end(terminated_code.value_or(-SIGKILL),
               terminated_code ? detail : "its pod " + name + " was deleted" + (deleting ? "" : " by someone else"));
  }
  created = true;
  if (at == stage::creating) at = stage::pending;
  auto* status = object_at(*pod, "status");
  if (!status) return;
  if (auto* conditions = status->if_contains("conditions"); conditions && conditions->is_array())
    for (auto& c : conditions->as_array()) {
      if (!c.is_object()) continue;
      auto& co = c.as_object();
      if (string_at(&co, "type") == "PodScheduled" && string_at(&co, "status") == "False" &&
          string_at(&co, "reason") == "Unschedulable") {
        auto message = string_at(&co, "message");
        last_reason = "Unschedulable: " + message;
        pending_changed();
        if (shared->cfg.kubernetes_autoscaling) continue;
        // The scheduler names no taint: which ones, and whether they pass by themselves, takes
        // the nodes (when this master may list them).
        if (refused_for_taints(message)) {
          if (!taints_asked) check_taints(message, object_at(*pod, "spec"));
          return;
        }
        return never_schedulable(message);
      }
    }
  auto* statuses = status->if_contains("containerStatuses");
  if (!statuses || !statuses->is_array()) return;
  for (auto& cs : statuses->as_array()) {
    if (!cs.is_object()) continue;
    auto* state = object_at(cs.as_object(), "state");
    if (!state) continue;
    if (auto* waiting = object_at(*state, "waiting")) {
      auto reason = string_at(waiting, "reason");
      auto message = string_at(waiting, "message");
      last_reason = reason + (message.empty() ? "" : ": " + message);
      pending_changed();
      if (hopeless_waiting_reason(reason)) return fail("Kubernetes cannot start its pod " + name + ": " + last_reason);
    } else if (object_at(*state, "running")) {
      running();
    } else if (auto* terminated = object_at(*state, "terminated")) {
      if (auto reason = string_at(terminated, "reason"); never_ran_reason(reason))
        return fail("Kubernetes cannot start its pod " + name + ": " + reason + ": " + string_at(terminated, "message"));
      running();  // it ran, however briefly
      terminated_now(*terminated);
    }
  }
}

void pod_run::never_schedulable(const std::string& message) {
  // Without an autoscaler no room will come: the start fails for good (errc::unsatisfiable), and a
  // pool stops starting workers instead of trying again and again while the workers that fit run
  // (Pool(100) on nodes that held 40: a create a second).
  unschedulable = true;
  fail("Kubernetes cannot schedule its pod " + name + ": " + message + " (it asked for " + asked +
       "; set kubernetes_autoscaling=true to wait for new nodes)");
}

void pod_run::check_taints(const std::string& message, const boost::json::object* spec) {
  taints_asked = true;
  std::weak_ptr<pod_run> weak = weak_from_this();
  ask_untolerated_taints(*shared->client, spec ? *spec : boost::json::object{},
                         [weak, message](const untolerated& taints, const std::string& why) {
    auto self = weak.lock();
    if (!self || self->at == stage::ended || self->at == stage::running) return;
    if (!why.empty()) return self->never_schedulable(message + " (which taints, listing the nodes would say: " + why + ")");
    if (!taints.passing)
      return self->fail("Kubernetes cannot schedule its pod " + self->name + ": " + message + lasting_taints_words(taints));
    // Taints the cluster takes off by itself (nodes the control plane lost sight of during a
    // restart, a node under memory or disk pressure): the pod waits, as a pod of any controller
    // would, up to the pending timeout. The scheduler tries again when the nodes change; asking
    // again once it refuses again sees whether the taints are still passing ones.
    self->last_reason = "Unschedulable: " + message + (taints.nodes.empty() ? "" : " Untolerated: " + taints.nodes);
    self->pending_changed();
    logf(log_level::warn, self->process_name, ": its pod ", self->name, " waits: ",
         taints.nodes.empty() ? std::string("the taints that kept it off are gone") : "the nodes carry " + taints.nodes,
         ", taints the cluster takes off by itself (up to kubernetes_pending_timeout_ms=",
         self->shared->cfg.kubernetes_pending_timeout_ms, ")");
    self->taints_asked = false;
  });
}

void pod_run::follow_logs() {
  logs_open = true;
  logs_stream = shared->client->stream(
      path() + "/log?follow=true&container=" + std::string(container_name) +
          (logs_since.empty() ? std::string() : "&sinceTime=" + logs_since),
      std::chrono::milliseconds(0),
      {"get", "pods/log"},
      [self = shared_from_this()](std::string_view line) {
        std::string text(line);
        text += '\n';
        for (std::size_t done = 0; done < text.size();) {
          auto n = ::write(1, text.data() + done, text.size() - done);
          if (n <= 0) break;
          done += static_cast<std::size_t>(n);
        }
        self->output_tail += text;
        if (self->output_tail.size() > 2048) self->output_tail.erase(0, self->output_tail.size() - 2048);
      },
      [self = shared_from_this()](std::error_code, long, const std::string&) {
        self->logs_open = false;
        self->logs_stream = 0;
        if (self->terminated_code) self->finish();
      });
}

void pod_run::terminated_now(const boost::json::object& t) {
  if (terminated_code) return;
  auto* exit = t.if_contains("exitCode");
  int c = exit && exit->is_int64() ? static_cast<int>(exit->as_int64()) : not_started;
  // The container reports death by signal N as 128 + N; fiber reports -N on every backend.
  if (c > 128 && c <= 128 + 64) c = -(c - 128);
  terminated_code = c;
  logf(log_level::debug, process_name, ": pod ", name, " terminated with ", c, logs_open ? " (its log still open)" : "");
  auto reason = string_at(&t, "reason");
  if (reason == "OOMKilled") {
    // The kernel killed it inside its container's limit (one without a limit: the node ran out).
    if (memory_limit_mb) stopped_for_memory({memory_limit_mb, 0});
    detail = memory_limit_mb ? memory_stop_text({memory_limit_mb, 0}) + ": its pod " + name + " was OOMKilled"
                             : "OOMKilled: its pod " + name + " ran its node out of memory";
  }
  else if (c != 0 && !reason.empty() && reason != "Error" && reason != "Completed")
    detail = reason + (string_at(&t, "message").empty() ? "" : ": " + string_at(&t, "message"));
  if (!logs_open) return finish();
  // The log stream closes right after the container stops; its last lines explain a failure.
  logs_grace.expires_after(std::chrono::seconds(1));
  logs_grace.async_wait([self = shared_from_this()](std::error_code ec) {
    if (!ec) self->finish();
  });
}

void pod_run::finish() {
  if (at == stage::ended) return;
  logs_grace.cancel();
  const int exit_code = terminated_code.value_or(-SIGKILL);  // finish() follows a terminated status
  if (detail.empty() && exit_code != 0 && !output_tail.empty()) {
    auto tail = output_tail;
    while (!tail.empty() && tail.back() == '\n') tail.pop_back();
    detail = "its last output: " + tail;
  }
  remove_then(0, [self = shared_from_this(), exit_code] { self->end(exit_code, self->detail); });
}

void pod_run::end(int exit_code, std::string why) {
  if (at == stage::ended) return;
  logf(log_level::debug, process_name, ": ended (pod ", name, " deleted)");
  at = stage::ended;
  code = exit_code;
  detail = why;
  pending_timer.cancel();
  kill_deadline.cancel();
  shared->watch->unfollow(name);
  if (logs_stream) shared->client->cancel(logs_stream);
  report_end(exit_code, std::move(why));
}

void pod_run::remove_then(int grace_seconds, unique_function<void()> next) {
  if (!created || deleting) return next();
  deleting = true;
  shared->client->call(
      "DELETE", path(), delete_body(grace_seconds), {"delete", "pods"},
      [name = name, next = std::move(next)](std::error_code ec, long status, const boost::json::value&, const std::string& why) mutable {
        if (ec && status != 404) logf(log_level::warn, "could not delete pod ", name, ": ", why);
        next();
      },
      /*limited=*/true);
}

void pod_run::signal_now(int sig) {
  if (at == stage::ended) return;
  if (!created) {
    if (pending_signal != SIGKILL) pending_signal = sig;
    return;
  }
  if (sig == SIGTERM) {
    if (stopping) return;  // asked already
    // Deleting is how Kubernetes stops a pod: the kubelet sends SIGTERM, then SIGKILL after the
    // grace period, and deletes the pod only after it has reported how the container ended.
    stopping = true;
    return remove((shared->cfg.terminate_grace_ms + 999) / 1000);
  }
  if (sig == SIGKILL && stopping) {
    // terminate()'s SIGKILL after its grace: the kubelet enforces that same grace itself. Deleting
    // now with grace 0 removed the pod before the kubelet reported a container that had ended on
    // the SIGTERM, and a busy cluster turned -15 into -9. Only if the kubelet stays silent (its
    // node is gone) is the pod removed without its word.
    kill_deadline.expires_after(std::chrono::milliseconds(shared->cfg.kubernetes_stop_timeout_ms));
    kill_deadline.async_wait([weak = weak_from_this()](std::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || self->at == stage::ended) return;
      logf(log_level::warn, self->process_name, ": the kubelet did not report its pod ", self->name,
           " stopped within kubernetes_stop_timeout_ms=", self->shared->cfg.kubernetes_stop_timeout_ms,
           " of its grace period: deleting it without that report (its node may be gone)");
      self->deleting = false;
      self->forced = true;
      self->remove(0);
    });
    return;
  }
  if (sig == SIGKILL) {
    stopping = forced = true;
    deleting = false;  // a delete in flight for another reason does not kill now
    return remove(0);
  }
  logf(log_level::warn, "signal ", sig, " cannot be sent to ", process_name,
       ": Kubernetes stops pods (SIGTERM, SIGKILL) and sends no other signals");
}


}  // namespace

std::shared_ptr<engine_run> start_pod(std::shared_ptr<pods_shared> shared, std::string process, std::string pod,
                                      std::string asked, const boost::json::object& manifest,
                                      std::uint64_t memory_limit_mb) {
  auto run = std::make_shared<pod_run>(std::move(shared), std::move(process), std::move(pod));
  run->asked = std::move(asked);
  run->memory_limit_mb = memory_limit_mb;
  run->submit(manifest);
  asio::post(run->shared->io, [run] { run->follow(); });  // the watch is the loop's
  return run;
}

std::shared_ptr<engine_run> adopt_pod(std::shared_ptr<pods_shared> shared, const std::string& pod) {
  auto run = std::make_shared<pod_run>(std::move(shared), "pod " + pod, pod);
  run->create_answer->set({});  // it exists
  run->created = true;
  run->at = pod_run::stage::pending;  // the watch says it runs
  char when[32];
  auto now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  run->logs_since = when;
  asio::post(run->shared->io, [run] { run->follow(); });
  return run;
}

}  // namespace fiber::detail::kube
