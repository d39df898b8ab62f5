// Calls a worker-side client sent and waits to hear about, by request id: the client opens one
// per call and takes it back when the reply (or service_gone) arrives. On the loop thread.
#pragma once
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>

#include "fiber/detail/completion.hpp"

namespace fiber::detail {

template <class T>
class pending_calls {
 public:
  /// A new call: its request id and what completes it.
  std::pair<std::uint64_t, std::shared_ptr<completion<T>>> open() {
    auto c = std::make_shared<completion<T>>();
    auto id = next_++;
    calls_.emplace(id, c);
    return {id, std::move(c)};
  }
  /// The call `id` answers, or null when nobody waits for it (any more).
  std::shared_ptr<completion<T>> take(std::uint64_t id) {
    auto it = calls_.find(id);
    if (it == calls_.end()) return nullptr;
    auto c = std::move(it->second);
    calls_.erase(it);
    return c;
  }

 private:
  std::uint64_t next_ = 1;
  std::unordered_map<std::uint64_t, std::shared_ptr<completion<T>>> calls_;
};

}  // namespace fiber::detail
