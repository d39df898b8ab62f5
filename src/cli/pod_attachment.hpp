// `fiber run` on Kubernetes, attached: follows a run's master pod on the API client's loop, says
// what keeps it pending, streams its output once it runs, and ends with its exit code; Ctrl-C
// detaches. Used by kubernetes_runner's run and logs.
#pragma once
#include <asio/post.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>

#include <boost/json.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "backend/kubernetes/blocking_api.hpp"
#include "backend/kubernetes/node_taints.hpp"
#include "backend/kubernetes/pod_watch.hpp"
#include "cli/pod_state.hpp"
#include "transport/run_until.hpp"

namespace fiber::cli {
namespace json = boost::json;
using detail::kube::blocking_api;

class pod_attachment {
 public:
  pod_attachment(blocking_api& api, std::string ns, std::string job, bool autoscaling)
      : api_(api), ns_(std::move(ns)), job_(std::move(job)), autoscaling_(autoscaling), signals_(api.io(), SIGINT, SIGTERM),
        first_pod_limit_(api.io()) {}

  struct outcome {
    std::optional<int> exit_code;
    std::string failure, pod;  // failure: why it cannot run (the run is removed then)
    bool detached = false;
  };

  /// Each line of the master's output, after it is printed (the pod's name, the line).
  void on_line(std::function<void(const std::string& pod, std::string_view line)> f) { on_line_ = std::move(f); }
  /// Work of the caller's on the loop that the attachment waits for before it ends (hold, then
  /// release once done), such as taking what the master offered in its output.
  void hold() noexcept { ++held_; }
  void release() {
    --held_;
    maybe_done();
  }

  /// `print_pod` once the Job made its pod (the pod's name); `attach`: then follow it.
  outcome run(bool attach, const std::function<void(const std::string&)>& print_pod) {
    attach_ = attach;
    print_pod_ = print_pod;
    watch_ = std::make_shared<detail::kube::pod_watch>(api_.io(), api_.api(), ns_, "job-name=" + job_);
    watch_->follow_others([this](const std::string& name, const json::object* pod, const std::string& problem) {
      if (!problem.empty()) return finish_with_failure("watching its pod failed: " + problem);
      if (!pod || !out_.pod.empty()) return;
      out_.pod = name;
      first_pod_limit_.cancel();
      print_pod_(name);
      if (!attach_) return done();
      watch_->follow(name, [this](const json::object* p, const std::string& why) { changed(p, why); });
    });
    first_pod_limit_.expires_after(std::chrono::seconds(120));
    first_pod_limit_.async_wait([this](std::error_code ec) {
      if (!ec && out_.pod.empty())
        finish_with_failure("Kubernetes made no pod for Job " + job_ + " in 120 s: `kubectl describe job " + job_ +
                            "` says why (a missing service account, a quota)");
    });
    signals_.async_wait([this](std::error_code ec, int) {
      if (ec) return;
      out_.detached = true;
      done();
    });
    asio::post(api_.io(), [w = watch_] { w->start(); });
    detail::run_until(api_.io(), [&] { return finished_; });
    return out_;
  }

 private:
  void changed(const json::object* pod, const std::string& problem) {
    if (finished_) return;
    if (!problem.empty()) return finish_with_failure("watching its pod failed: " + problem);
    if (!pod) {
      if (!exit_code_) return finish_with_failure("its pod " + out_.pod + " was deleted before it ended");
      return;
    }
    auto st = state_of(*pod);
    if (!st.reason.empty() && st.reason != said_) {
      said_ = st.reason;
      if (!st.started) std::fprintf(stderr, "fiber: %s is pending: %s\n", out_.pod.c_str(), st.reason.c_str());
    }
    if (!st.started && st.hopeless)
      return finish_with_failure("its pod " + out_.pod + " cannot start: " + st.reason);
    if (!st.started && st.unschedulable && !autoscaling_) {
      auto message = st.reason.substr(15);
      // The scheduler names no taint: the nodes say which, and whether they pass by themselves.
      if (detail::kube::refused_for_taints(message)) {
        if (!taints_asked_) check_taints(message, pod);
        return;
      }
      return never_schedulable(message);
    }
    if (st.started && !logs_started_) follow_logs();
    if (st.exit_code && !exit_code_) {
      exit_code_ = st.exit_code;
      maybe_done();
    }
  }

  void follow_logs() {
    logs_started_ = true;
    logs_open_ = true;
    api_.api().stream(
        "/api/v1/namespaces/" + ns_ + "/pods/" + out_.pod + "/log?follow=true&container=" + master_container,
        std::chrono::milliseconds(0), {"get", "pods/log"},
        [this](std::string_view line) {
          std::fwrite(line.data(), 1, line.size(), stdout);
          std::fputc('\n', stdout);
          std::fflush(stdout);
          if (on_line_) on_line_(out_.pod, line);
        },
        [this](std::error_code, long, const std::string&) {
          logs_open_ = false;
          maybe_done();
        });
  }

  void never_schedulable(const std::string& message) {
    finish_with_failure("Kubernetes cannot schedule its pod " + out_.pod + ": " + message +
                        " (lower --cpu/--memory/--gpu, or set kubernetes_autoscaling=true to wait for nodes)");
  }

  void check_taints(const std::string& message, const json::object* pod) {
    taints_asked_ = true;
    auto* spec = pod->if_contains("spec");
    detail::kube::ask_untolerated_taints(
        api_.api(), spec && spec->is_object() ? spec->as_object() : json::object{},
        [this, alive = std::weak_ptr<bool>(alive_), message](const detail::kube::untolerated& taints, const std::string& why) {
          if (alive.expired() || finished_) return;
          taints_asked_ = false;
          if (!why.empty()) return never_schedulable(message + " (which taints, listing the nodes would say: " + why + ")");
          if (!taints.passing)
            return finish_with_failure("Kubernetes cannot schedule its pod " + out_.pod + ": " + message +
                                       detail::kube::lasting_taints_words(taints));
          // Taints the cluster takes off by itself (nodes lost from sight during a control plane's
          // restart, a node under pressure): the run waits, as any Job's pod would.
          std::fprintf(stderr, "fiber: %s waits: %s, taints the cluster takes off by itself\n", out_.pod.c_str(),
                       taints.nodes.empty() ? "the taints that kept it off are gone"
                                            : ("the nodes carry " + taints.nodes).c_str());
        });
  }

  void maybe_done() {
    if (exit_code_ && !logs_open_ && held_ == 0) {
      out_.exit_code = exit_code_;
      done();
    }
  }

  void finish_with_failure(std::string why) {
    if (finished_) return;
    out_.failure = std::move(why);
    done();
  }

  void done() {
    finished_ = true;
    watch_->stop();
    signals_.cancel();
    first_pod_limit_.cancel();
  }

  blocking_api& api_;
  std::string ns_, job_;
  bool autoscaling_, attach_ = false;
  asio::signal_set signals_;
  asio::steady_timer first_pod_limit_;
  std::shared_ptr<detail::kube::pod_watch> watch_;
  std::function<void(const std::string&)> print_pod_;
  std::function<void(const std::string&, std::string_view)> on_line_;
  int held_ = 0;
  outcome out_;
  std::optional<int> exit_code_;
  std::string said_;
  bool finished_ = false, logs_started_ = false, logs_open_ = false;
  bool taints_asked_ = false;  // the nodes' taints are being listed
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for answers that come after this is gone
};

}  // namespace fiber::cli
