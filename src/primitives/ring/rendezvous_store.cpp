#include "primitives/ring/rendezvous_store.hpp"

#include <algorithm>

#include "primitives/ring/wire.hpp"

namespace fiber::detail {

rendezvous_store::rendezvous_store(asio::io_context& io, reply_fn reply, fail_fn fail)
    : io_(io), reply_(std::move(reply)), fail_(std::move(fail)) {}

rendezvous_store::~rendezvous_store() { drop_waiting(); }

void rendezvous_store::set(const std::string& peer, std::uint64_t request, const std::string& key, std::string value) {
  values_[key] = std::move(value);
  reply_(peer, request, {});
  wake(key);
}

void rendezvous_store::add(const std::string& peer, std::uint64_t request, const std::string& key, std::int64_t delta) {
  std::int64_t sum = delta;
  if (auto it = values_.find(key); it != values_.end()) {
    auto held = stored_number(it->second);
    if (!held)
      return fail_(peer, request, errc::malformed_message, "add on key '" + key + "', which holds '" + it->second + "', not a number");
    sum += *held;
  }
  values_[key] = std::to_string(sum);
  reply_(peer, request, std::string_view(reinterpret_cast<const char*>(&sum), sizeof sum));
  wake(key);
}

void rendezvous_store::get(const std::string& peer, std::uint64_t request, const std::string& key,
                           std::chrono::milliseconds timeout, const std::string* lost) {
  if (auto it = values_.find(key); it != values_.end()) return reply_(peer, request, it->second);
  if (lost) return fail_(peer, request, errc::member_lost, *lost);
  auto timer = std::make_shared<asio::steady_timer>(io_, timeout);
  timer->async_wait([this, alive = std::weak_ptr<bool>(alive_), key, request, peer, timeout](std::error_code ec) {
    if (!ec && !alive.expired()) timed_out(peer, request, key, timeout);
  });
  waiting_[key].push_back({peer, request, std::move(timer)});
}

void rendezvous_store::timed_out(const std::string& peer, std::uint64_t request, const std::string& key,
                                 std::chrono::milliseconds timeout) {
  auto it = waiting_.find(key);
  if (it == waiting_.end()) return;
  std::erase_if(it->second, [&](const waiter& w) { return w.request == request && w.peer == peer; });
  if (it->second.empty()) waiting_.erase(it);
  fail_(peer, request, errc::timeout, "key '" + key + "' was not set within " + std::to_string(timeout.count()) + " ms");
}

void rendezvous_store::put(const std::string& key, std::string value) {
  values_[key] = std::move(value);
  wake(key);
}

void rendezvous_store::wake(const std::string& key) {
  auto it = waiting_.find(key);
  if (it == waiting_.end()) return;
  auto list = std::move(it->second);
  waiting_.erase(it);
  for (auto& w : list) {
    w.timer->cancel();
    reply_(w.peer, w.request, values_[key]);
  }
}

void rendezvous_store::fail_waiting(const std::string& why) {
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& [key, list] : waiting)
    for (auto& w : list) {
      w.timer->cancel();
      fail_(w.peer, w.request, errc::member_lost, why);
    }
}

void rendezvous_store::drop_waiting() noexcept {
  for (auto& [key, list] : waiting_)
    for (auto& w : list) w.timer->cancel();
  waiting_.clear();
}

std::size_t rendezvous_store::waiting() const {
  std::size_t n = 0;
  for (auto& [key, list] : waiting_) n += list.size();
  return n;
}

}  // namespace fiber::detail
