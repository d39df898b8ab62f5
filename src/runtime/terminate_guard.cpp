#include "runtime/terminate_guard.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/log.hpp"
#include "runtime/runtime.hpp"

namespace fiber::detail {

namespace {
struct guarded {
  std::mutex mutex;
  std::vector<std::weak_ptr<runtime>> masters;
  std::terminate_handler previous = nullptr;
  std::once_flag installed;
};
guarded& the_guard() {
  static auto* g = new guarded;  // never destroyed: the handler may run during static destruction
  return *g;
}

std::string uncaught_words() {
  auto e = std::current_exception();
  if (!e) return "std::terminate was called";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return std::string("an uncaught exception: ") + x.what();
  } catch (...) {
    return "an uncaught exception not derived from std::exception";
  }
}

// How long the handler gives the children's end: a backend's stop removes containers, deletes
// pods and cancels jobs, each a few requests. A loop that cannot be reached (the exception came
// from inside it, holding what the stop needs) must not turn an abort into a hang.
constexpr auto end_children_within = std::chrono::seconds(30);

[[noreturn]] void end_children_then_terminate() {
  static std::atomic<bool> entered{false};
  auto& g = the_guard();
  if (!entered.exchange(true)) {
    std::vector<std::shared_ptr<runtime>> live;
    {
      std::lock_guard lock(g.mutex);
      for (auto& w : g.masters)
        if (auto rt = w.lock()) live.push_back(std::move(rt));
    }
    if (!live.empty()) {
      logf(log_level::error, "the program is ending (", uncaught_words(), "); ending its children first");
      // The loop this thread drives (the exception came from one of its handlers) can only be
      // stopped here; the others are stopped by a helper, so that a loop nobody drives now
      // cannot hold the abort for ever.
      std::erase_if(live, [](auto& rt) {
        if (!rt->loop().in_loop_thread()) return false;
        rt->stop();
        return true;
      });
    }
    if (!live.empty()) {
      struct done_flag {
        std::mutex m;
        std::condition_variable cv;
        bool done = false;
      };
      auto flag = std::make_shared<done_flag>();
      std::thread([live = std::move(live), flag]() mutable {
        for (auto& rt : live) rt->stop();
        live.clear();
        std::lock_guard lock(flag->m);
        flag->done = true;
        flag->cv.notify_all();
      }).detach();
      std::unique_lock lock(flag->m);
      if (!flag->cv.wait_for(lock, end_children_within, [&] { return flag->done; }))
        logf(log_level::error, "the children could not be ended within 30 s; see `fiber ps` and `fiber gc`");
    }
  }
  if (g.previous) g.previous();
  std::abort();
}
}  // namespace

void guard_on_terminate(const std::shared_ptr<runtime>& rt) {
  auto& g = the_guard();
  std::call_once(g.installed, [&] { g.previous = std::set_terminate(&end_children_then_terminate); });
  std::lock_guard lock(g.mutex);
  std::erase_if(g.masters, [](auto& w) { return w.expired(); });
  g.masters.push_back(rt);
}

void unguard_on_terminate(const runtime* rt) noexcept {
  auto& g = the_guard();
  std::lock_guard lock(g.mutex);
  std::erase_if(g.masters, [&](auto& w) {
    auto p = w.lock();
    return !p || p.get() == rt;
  });
}

}  // namespace fiber::detail
