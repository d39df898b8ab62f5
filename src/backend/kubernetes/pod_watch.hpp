// One watch per master: every pod of the job, listed once and then followed from the list's
// resourceVersion (bookmarks kept, a fresh list after 410 Gone), feeds each child's state. No pod
// is ever polled.
#pragma once
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <boost/json/object.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "backend/kubernetes/kube_api.hpp"

namespace fiber::detail::kube {

class pod_watch : public std::enable_shared_from_this<pod_watch> {
 public:
  /// `pod` is the pod's latest state, or null once it is gone; `problem` is set instead when the
  /// watch itself cannot go on (forbidden, credentials refused).
  using on_change = std::function<void(const boost::json::object* pod, const std::string& problem)>;

  pod_watch(asio::io_context& io, api& api, std::string ns, std::string label_selector);

  void start();
  void stop();
  void follow(const std::string& pod, on_change f);
  /// Every pod of the selector that is not followed by name (the fiber command finds a Job's pod
  /// this way): `name`, then as on_change. Pods already seen are delivered at once.
  using on_any = std::function<void(const std::string& name, const boost::json::object* pod, const std::string& problem)>;
  void follow_others(on_any f);
  void unfollow(const std::string& pod) { followed_.erase(pod); }
  /// Lists and watches made so far (the benchmark counts them).
  std::uint64_t lists() const noexcept { return lists_; }
  std::uint64_t watches() const noexcept { return watches_; }

 private:
  void list();
  void watch();
  void line(std::string_view text);
  void deliver(const std::string& name, const boost::json::object* pod);
  void retry_later(const std::string& why, long status, bool listing);
  void give_up(const std::string& why);

  asio::io_context& io_;
  api& api_;
  std::string ns_, selector_;
  std::string rv_;
  std::map<std::string, on_change> followed_;
  on_any others_;
  std::map<std::string, boost::json::object> known_;  // the latest state of every pod of the job
  std::uint64_t stream_ = 0, lists_ = 0, watches_ = 0;
  asio::steady_timer retry_;
  int failures_ = 0;
  bool stopped_ = false, relist_ = false;
  bool renewed_ = false;  // a 401 was answered by reading the token again; another gives up
  std::string problem_;
};

}  // namespace fiber::detail::kube
