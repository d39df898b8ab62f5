#include "backend/spawner.hpp"

#include <pthread.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

namespace fiber::detail {
namespace {

struct request {
  unique_function<void()> f;
  std::exception_ptr failure;
  bool done = false;
};

class spawner {
 public:
  static spawner& instance() {
    // Never destroyed: the thread lives until the process ends, and so does its children's parent.
    static std::once_flag at_fork;
    std::call_once(at_fork, [] { ::pthread_atfork(nullptr, nullptr, [] { current_ = nullptr; }); });
    std::lock_guard lock(instance_mutex_);
    if (!current_) current_ = new spawner;  // (a forked child has no spawner thread: it makes its own)
    return *current_;
  }

  void run(unique_function<void()> f) {
    if (std::this_thread::get_id() == thread_id_) return f();
    request r{std::move(f), nullptr, false};
    std::unique_lock lock(mutex_);
    queue_.push_back(&r);
    wake_.notify_one();
    finished_.wait(lock, [&] { return r.done; });
    if (r.failure) std::rethrow_exception(r.failure);
  }

 private:
  spawner() {
    std::thread t([this] { loop(); });
    thread_id_ = t.get_id();
    t.detach();
  }

  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return !queue_.empty(); });
      auto* r = queue_.front();
      queue_.pop_front();
      lock.unlock();
      try {
        r->f();
      } catch (...) {
        r->failure = std::current_exception();
      }
      lock.lock();
      r->done = true;
      finished_.notify_all();
    }
  }

  static inline spawner* current_ = nullptr;
  static inline std::mutex instance_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::deque<request*> queue_;
  std::thread::id thread_id_;
};

}  // namespace

void run_on_spawner_thread(unique_function<void()> f) { spawner::instance().run(std::move(f)); }

}  // namespace fiber::detail
