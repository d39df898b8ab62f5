// What a context waits for before it ends: each non-daemon child whose object went before the
// child did (multiprocessing joins such children at exit). A hold is taken and let go on the loop
// thread; the wait names what it waits for, and does not wait where nobody could run the loop
// meanwhile (a caller's io_context, or the loop's own thread), where the children end with the
// context instead.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "runtime/event_loop.hpp"

namespace fiber::detail {

class end_holds {
 public:
  /// `loop` outlives this.
  explicit end_holds(event_loop& loop) : loop_(loop) {}
  /// Holds `what` until let_go(id); on the loop thread.
  std::uint64_t hold(std::shared_ptr<void> what, std::string name);
  void let_go(std::uint64_t id);
  /// Blocks until nothing is held, saying what it waits for (a warning: a program that does not
  /// exit says why); at once where the loop cannot run meanwhile.
  void wait();
  std::size_t held() const noexcept { return held_.size(); }

 private:
  event_loop& loop_;
  std::map<std::uint64_t, std::pair<std::shared_ptr<void>, std::string>> held_;
  std::uint64_t next_ = 0;
  std::atomic<bool> none_held_{true};
};

}  // namespace fiber::detail
