// The pool's progress line on stderr, redrawn every 200 ms while work is under way: opt-in
// (pool_options::progress), and only when stderr is a terminal.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include "fiber/detail/unique_function.hpp"

namespace fiber::detail {

class progress_line {
 public:
  struct frame {
    std::string text;
    bool last = false;  // the work is done: the line ends after this text
  };
  /// The line now; nullopt stops drawing at once (fiber's context shut down).
  using render_fn = unique_function<std::optional<frame>()>;
  progress_line(bool enabled, render_fn render) : enabled_(enabled), render_(std::move(render)) {}

  /// Draws until `render` says the work is done; nothing when disabled or already drawing.
  /// `owner` keeps this line alive in the timer's callback.
  void start(asio::io_context& io, const std::weak_ptr<void>& owner);
  void cancel() noexcept;

 private:
  void tick(const std::weak_ptr<void>& owner);
  bool enabled_;
  render_fn render_;
  std::unique_ptr<asio::steady_timer> timer_;
};

}  // namespace fiber::detail
