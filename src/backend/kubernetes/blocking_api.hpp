// Kubernetes API calls run to completion, for callers that may block.
#pragma once
#include <asio/io_context.hpp>

#include <boost/json/value.hpp>
#include <mutex>
#include <optional>
#include <string>

#include "backend/kubernetes/kube_api.hpp"
#include "fiber/error.hpp"
#include "transport/run_until.hpp"

namespace fiber::detail::kube {

/// Runs API calls to completion on a private io_context, for the steps that must block: the
/// backend's first contact, its removal of what is left when a job is reaped or the master ends
/// (the caller's io_context may not run again), and the fiber command's every step.
class blocking_api {
 public:
  explicit blocking_api(const access& where) : api_(io_, where, 1000, 1000) {}

  struct answer {
    std::error_code ec;
    long status = 0;
    boost::json::value body;
    std::string why;
  };
  answer call(std::string method, std::string path, std::string body, verb_on what) {
    std::lock_guard lock(m_);
    std::optional<answer> out;
    api_.call(std::move(method), std::move(path), std::move(body), std::move(what),
              [&](std::error_code ec, long status, boost::json::value b, std::string why) {
                out = answer{ec, status, std::move(b), std::move(why)};
              });
    run_until(io_, [&] { return out.has_value(); });
    if (!out) return {make_error_code(errc::backend_unavailable), 0, nullptr, "the request never completed"};
    return std::move(*out);
  }

  /// For streams (a watch, a followed log) and calls that run side by side: start them on api(),
  /// then run io(). Not with call() at the same time.
  kube::api& api() noexcept { return api_; }
  /// Cancels a stream started on api() and runs its completion now, not whenever io() runs next:
  /// a caller's handlers often write the caller's locals, which would be gone by then.
  void cancel(std::uint64_t id) {
    api_.cancel(id);
    run_ready(io_);
  }
  asio::io_context& io() noexcept { return io_; }

 private:
  std::mutex m_;
  asio::io_context io_;
  kube::api api_;
};

}  // namespace fiber::detail::kube
