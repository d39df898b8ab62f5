#include "primitives/child_start_gate.hpp"

namespace fiber::detail {

void child_start_gate::arm(asio::io_context& io, std::chrono::milliseconds limit,
                           unique_function<void(std::error_code)> fired) {
  if (!waiting()) return;
  timer_ = std::make_unique<asio::steady_timer>(io, limit);
  timer_->async_wait(std::move(fired));
}

void child_start_gate::complete(std::error_code ec, std::string detail) {
  if (timer_) timer_->cancel();
  if (auto h = std::move(handler_)) {
    handler_ = nullptr;
    h(ec, std::move(detail));
  }
}

}  // namespace fiber::detail
