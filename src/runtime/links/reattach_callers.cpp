#include "runtime/links/reattach_callers.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/log.hpp"

namespace fiber::detail {

reattach_callers::~reattach_callers() {
  for (auto& c : callers_) ::close(c.fd);
}

void reattach_callers::add(int fd, clock::time_point now) {
  if (callers_.size() >= limit_ && !callers_.empty()) end(0);
  caller c{fd, reattach_random(), {}, now + patience_};
  std::string hello(reattach_greeting);
  hello.append(reinterpret_cast<const char*>(c.mine.data()), c.mine.size());
  // 48 bytes into a fresh socket's empty buffer: written whole, or the caller is already gone.
  if (::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(hello.size())) {
    ::close(fd);
    return;
  }
  callers_.push_back(std::move(c));
}

void reattach_callers::watch(std::vector<pollfd>& fds) const {
  for (auto& c : callers_) fds.push_back({c.fd, POLLIN, 0});
}

std::optional<reattach_callers::proven> reattach_callers::readable(int fd) {
  auto it = std::find_if(callers_.begin(), callers_.end(), [fd](const caller& c) { return c.fd == fd; });
  if (it == callers_.end()) return std::nullopt;
  auto at = static_cast<std::size_t>(it - callers_.begin());
  constexpr std::size_t wanted = reattach_challenge_bytes + reattach_proof_bytes;
  char buf[wanted];
  auto n = ::recv(fd, buf, wanted - it->got.size(), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return std::nullopt;
  if (n <= 0) {  // its end, or an error: it said too little
    end(at);
    return std::nullopt;
  }
  it->got.append(buf, static_cast<std::size_t>(n));
  if (it->got.size() < wanted) return std::nullopt;
  proven p{it->fd, it->mine, {}};
  reattach_proof proof{};
  std::memcpy(p.theirs.data(), it->got.data(), p.theirs.size());
  std::memcpy(proof.data(), it->got.data() + p.theirs.size(), proof.size());
  if (!reattach_same(proof, reattach_prove(secret_, "master", p.mine, p.theirs))) {
    logf(log_level::warn, "refused a dial at this worker's reattach point: the caller does not know its secret");
    end(at);
    return std::nullopt;
  }
  callers_.erase(it);  // its socket is the caller's of readable() now
  return p;
}

void reattach_callers::expire(clock::time_point now) {
  for (std::size_t i = callers_.size(); i-- > 0;)
    if (callers_[i].deadline <= now) end(i);
}

std::optional<reattach_callers::clock::time_point> reattach_callers::next_deadline() const {
  if (callers_.empty()) return std::nullopt;
  auto first = callers_.front().deadline;
  for (auto& c : callers_) first = std::min(first, c.deadline);
  return first;
}

void reattach_callers::end(std::size_t at) {
  ::close(callers_[at].fd);
  callers_.erase(callers_.begin() + static_cast<std::ptrdiff_t>(at));
}

}  // namespace fiber::detail
