#include "runtime/links/lane_handshake.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "fiber/error.hpp"
#include "transport/shared_lane.hpp"

namespace fiber::detail {

namespace {
constexpr std::string_view shared_word = "shared", socket_word = "socket";
constexpr std::size_t passed_fds = 3;  // the segment, the master's doorbell, the child's
constexpr std::size_t head_bytes = sizeof(std::uint32_t) + sizeof(std::uint64_t);  // one part

void close_all(const std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
}
}  // namespace

bool answer_lane(stream_link& link, asio::io_context& io, bool offer) {
  auto channel = offer ? shared_channel::make(shared_lane::link_capacity, /*populate=*/false) : nullptr;
  auto word = channel ? shared_word : socket_word;
  multipart answer;
  answer.emplace_back(word.data(), word.size());
  std::string bytes = frame_head(answer);
  bytes.append(word);
  iovec iov{bytes.data(), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * passed_fds)> control{};
  if (channel) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    auto* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * passed_fds);
    int fds[passed_fds] = {channel->segment_fd(), channel->dialer_bell(), channel->acceptor_bell()};
    std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  }
  // A fresh socket that has carried nothing this way: its buffer takes the few bytes at once.
  ssize_t n;
  do {
    n = ::sendmsg(link.socket().native_handle(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(bytes.size())) return false;
  if (channel) return link.use_lane(shared_lane::open(io, std::move(channel)));
  return true;
}

void await_lane(stream_link& link, asio::io_context& io, std::chrono::milliseconds patience) {
  int fd = link.socket().native_handle();
  auto deadline = std::chrono::steady_clock::now() + patience;
  std::string got;
  std::vector<int> fds;
  auto fail = [&](std::error_code ec, const std::string& what) {
    close_all(fds);
    throw error(ec, what);
  };
  // Exactly the answer's bytes: whatever follows is the lane's.
  auto read_to = [&](std::size_t size) {
    while (got.size() < size) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) == 0)
        fail(make_error_code(std::errc::timed_out), "the master did not answer this child's greeting in time");
      char buf[64];
      iovec iov{buf, size - got.size()};
      alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * passed_fds)> control{};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control.data();
      msg.msg_controllen = control.size();
      auto n = ::recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
      if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (n < 0) fail(std::error_code(errno, std::system_category()), "reading the master's answer to this child's greeting");
      if (n == 0)
        fail(make_error_code(std::errc::connection_reset),
             "the master closed this child's link after its greeting (it did not know the job's password or this child)");
      for (auto* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
          int passed;
          std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof passed);
          fds.push_back(passed);
        }
      }
      if (msg.msg_flags & MSG_CTRUNC) fail(make_error_code(errc::protocol_error), "the master passed more descriptors than a lane has");
      got.append(buf, static_cast<std::size_t>(n));
    }
  };
  read_to(head_bytes);
  std::uint32_t parts;
  std::uint64_t size;
  std::memcpy(&parts, got.data(), sizeof parts);
  std::memcpy(&size, got.data() + sizeof parts, sizeof size);
  if (parts != 1 || size > 16) fail(make_error_code(errc::protocol_error), "the master's answer to the greeting is not one of this version");
  read_to(head_bytes + size);
  auto word = std::string_view(got).substr(head_bytes);
  if (word == socket_word && fds.empty()) return;
  if (word != shared_word || fds.size() != passed_fds)
    fail(make_error_code(errc::protocol_error), "the master's answer to the greeting is not one of this version");
  auto channel = shared_channel::join(fds[0], fds[1], fds[2], /*populate=*/false);  // takes them over
  fds.clear();
  if (!channel) throw error(make_error_code(errc::protocol_error), "the shared memory the master passed is not a sealed lane");
  if (!link.use_lane(shared_lane::open(io, std::move(channel))))
    throw error(make_error_code(errc::protocol_error), "this child's link had bytes queued before its lane");
}

}  // namespace fiber::detail
