#include "runtime/channels/pending_gets.hpp"

namespace fiber::detail {

std::uint64_t pending_gets::add(std::uint64_t channel, handler h) {
  auto request = next_request_++;
  auto& e = gets_[request];
  e.channel = channel;
  e.h = std::move(h);
  return request;
}

void pending_gets::expire_after(std::uint64_t request, asio::io_context& io, std::chrono::milliseconds timeout,
                                unique_function<void(std::uint64_t, std::uint64_t)> withdraw) {
  auto it = gets_.find(request);
  if (it == gets_.end()) return;
  it->second.timer = std::make_unique<asio::steady_timer>(io, timeout);
  it->second.timer->async_wait([this, alive = std::weak_ptr<int>(alive_), request,
                                withdraw = std::move(withdraw)](std::error_code ec) mutable {
    if (ec || alive.expired()) return;
    auto waiting = gets_.find(request);
    if (waiting == gets_.end()) return;
    withdraw(waiting->second.channel, request);
  });
}

void pending_gets::complete(std::uint64_t request, std::error_code ec, multipart&& payload, bool may_run_inline) {
  auto it = gets_.find(request);
  if (it == gets_.end()) return;
  auto e = std::move(it->second);
  gets_.erase(it);
  if (e.timer) e.timer->cancel();
  e.h(ec, std::move(payload), may_run_inline);
}

void pending_gets::fail_all(std::error_code ec) {
  auto gets = std::move(gets_);
  gets_.clear();
  for (auto& [request, e] : gets) {
    if (e.timer) e.timer->cancel();
    e.h(ec, {}, false);
  }
}

}  // namespace fiber::detail
