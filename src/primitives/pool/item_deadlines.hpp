// Task timeouts: one timer at the earliest deadline of an item running on any worker, moved
// earlier when an item with an earlier one starts, never later (a later deadline waits for the
// timer that is already set). When it fires, the pool ends the late workers and says which
// deadline comes next. Idle until a submission with a task_timeout uses it. On fiber's loop.
#pragma once
#include <chrono>
#include <memory>
#include <optional>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include "fiber/detail/unique_function.hpp"

namespace fiber::detail {

class item_deadlines {
 public:
  using clock = std::chrono::steady_clock;
  /// `due()` runs when the earliest deadline watched has passed; it deals with the late items
  /// and returns the next deadline, if any.
  using due_fn = unique_function<std::optional<clock::time_point>()>;

  item_deadlines(asio::io_context& io, due_fn due) : io_(io), due_(std::move(due)) {}
  /// From now on deadlines are watched (a submission has a task_timeout).
  void use();
  bool used() const noexcept { return timer_ != nullptr; }
  /// An item began running with this deadline (none: nothing to watch).
  void watch(std::optional<clock::time_point> when);
  void cancel() noexcept;

 private:
  void arm(clock::time_point when);
  asio::io_context& io_;
  due_fn due_;
  std::shared_ptr<asio::steady_timer> timer_;
  std::optional<clock::time_point> armed_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // a fired wait after this part went does nothing
};

}  // namespace fiber::detail
