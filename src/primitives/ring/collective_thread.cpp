#include "primitives/ring/collective_thread.hpp"

#include <asio/post.hpp>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <variant>

#include "fiber/context.hpp"
#include "fiber/detail/completion.hpp"

namespace fiber::detail {
namespace {

thread_local bool on_collective_thread = false;

/// One per ring in a member's process: runs queued collectives one after another.
class collective_thread {
 public:
  void push(unique_function<void()> job) {
    std::lock_guard lock(m_);
    jobs_.push_back(std::move(job));
    ++pending_;
    if (!started_) {
      started_ = true;
      // Never joined: it lives as long as the member's process, like the ring's links.
      std::thread([this] { run(); }).detach();
    }
    work_.notify_one();
  }

  void wait_idle() {
    if (on_collective_thread) return;
    std::unique_lock lock(m_);
    idle_.wait(lock, [&] { return pending_ == 0; });
  }

 private:
  void run() {
    on_collective_thread = true;
    std::unique_lock lock(m_);
    for (;;) {
      work_.wait(lock, [&] { return !jobs_.empty(); });
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
      if (--pending_ == 0) idle_.notify_all();
    }
  }

  std::mutex m_;
  std::condition_variable work_, idle_;
  std::deque<unique_function<void()>> jobs_;
  std::size_t pending_ = 0;
  bool started_ = false;
};

collective_thread& thread_of(std::uint64_t ring) {
  static std::mutex m;
  static auto* threads = new std::unordered_map<std::uint64_t, std::unique_ptr<collective_thread>>;
  std::lock_guard lock(m);
  auto& t = (*threads)[ring];
  if (!t) t = std::make_unique<collective_thread>();
  return *t;
}

}  // namespace

void wait_for_queued(const ring_member& me) { thread_of(me.identity().ring).wait_idle(); }

op<void> ring_async(const ring_member& me, unique_function<void()> work) {
  auto rt = context::default_context().runtime();
  auto job = std::make_shared<unique_function<void()>>(std::move(work));
  return deferred_op<void>(rt, [rt, ring = me.identity().ring, job] {
    auto c = std::make_shared<completion<std::monostate>>();
    thread_of(ring).push([rt, c, job] {
      std::exception_ptr failed;
      try {
        (*job)();
      } catch (...) {
        failed = std::current_exception();
      }
      // The completion belongs to fiber's loop.
      asio::post(executor_of(*rt), [c, failed] {
        if (failed)
          c->set_error(failed);
        else
          c->set_value({});
      });
    });
    return c;
  });
}

}  // namespace fiber::detail
