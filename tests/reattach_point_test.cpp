// A durable run's worker waiting for a new master (runtime/links/reattach_point) and the master
// dialling it (runtime/links/reattach_dial), over real abstract unix sockets and a real process
// standing for the master: the grace starts when that process ends (its pidfd) and ends the
// worker when nobody dials in; a master that proves the secret reads what the worker holds and
// hands it its record; a caller without the secret, or of another user, gets nothing and leaves
// the point waiting for the right one; an empty record tells the worker to leave. Over TCP too,
// through a relay on the path that sees neither what the worker holds nor its record, and whose
// change of one byte of the record is refused.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <future>
#include <optional>
#include <thread>
#include <string>
#include <vector>

#include "fiber/error.hpp"
#include "runtime/links/reattach_dial.hpp"
#include "runtime/links/reattach_point.hpp"

namespace {
using fiber::detail::reattach_dial;
using fiber::detail::reattach_point;
using namespace std::chrono_literals;

/// A process standing for the master: it waits until killed.
class stand_in_master {
 public:
  stand_in_master() {
    pid_ = ::fork();
    if (pid_ == 0) {
      for (;;) ::pause();
    }
  }
  ~stand_in_master() { end(); }
  int pid() const { return pid_; }
  void end() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  int pid_ = -1;
};

/// Dials `point` as a master that knows its secret, and hands it `record`.
void take_up(const reattach_point& point, const std::string& record) {
  reattach_dial(point.name(), point.secret(), 5s, 1024).send(record);
}

/// The handlers of a point under test, each telling a promise what it heard.
struct heard {
  std::promise<std::string> record;
  std::promise<void> expired;
  std::atomic<int> relinked{0}, gone{0};  // written on the point's thread
  reattach_point::handlers handlers(std::string state = "two results held") {
    return {[state] { return state; },
            [this](std::string r) {
              ++relinked;
              record.set_value(std::move(r));
              return 0;
            },
            [this] { expired.set_value(); },
            [this] { ++gone; }};
  }
};

TEST(reattach_point, the_grace_starts_when_the_masters_process_ends_and_ends_the_worker_when_nobody_dials) {
  stand_in_master master;
  heard h;
  auto ended = h.expired.get_future();
  reattach_point point(master.pid(), 50ms, h.handlers());
  master.end();
  ended.wait();  // the pidfd told the point; the grace passed with nobody dialling in
  EXPECT_EQ(h.relinked.load(), 0);
}

TEST(reattach_point, a_master_that_proves_the_secret_reads_what_the_worker_holds_and_hands_it_its_record) {
  heard h;
  auto record = h.record.get_future();
  reattach_point point(0, 60s, h.handlers("task 7: 3 results"));
  point.master_gone();
  reattach_dial dial(point.name(), point.secret(), 5s, 1024);
  EXPECT_EQ(h.gone.load(), 1) << "the worker heard its master was gone before a dial was taken";
  EXPECT_EQ(dial.state(), "task 7: 3 results");
  dial.send("link to unix:@new-master as 42");
  EXPECT_EQ(record.get(), "link to unix:@new-master as 42");
}

TEST(reattach_point, a_caller_without_the_secret_gets_nothing_and_the_right_master_still_takes_the_worker_up) {
  heard h;
  auto record = h.record.get_future();
  reattach_point point(0, 60s, h.handlers());
  point.master_gone();
  std::string wrong = point.secret();
  wrong[0] = wrong[0] == 'a' ? 'b' : 'a';
  EXPECT_THROW(reattach_dial(point.name(), wrong, 5s, 1024), std::system_error);  // the point hung up on it
  EXPECT_EQ(h.relinked.load(), 0);
  take_up(point, "here");
  EXPECT_EQ(record.get(), "here");
}

TEST(reattach_point, a_worker_that_says_it_holds_more_than_the_master_takes_is_refused_by_name) {
  heard h;
  reattach_point point(0, 60s, h.handlers(std::string(2048, 'x')));
  point.master_gone();
  try {
    reattach_dial dial(point.name(), point.secret(), 5s, 1024);
    FAIL() << "a state past the bound was read";
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::protocol_error);
    EXPECT_NE(std::string(e.what()).find("2048 bytes"), std::string::npos) << e.what();
  }
}

TEST(reattach_point, a_record_the_worker_cannot_take_leaves_it_waiting_for_the_next_dial) {
  heard h;
  auto record = h.record.get_future();
  bool refused_once = false;
  auto handlers = h.handlers();
  auto take = handlers.relink;
  handlers.relink = [&refused_once, take](std::string r) {
    if (!refused_once) {
      refused_once = true;
      throw std::runtime_error("unreadable record");
    }
    return take(std::move(r));
  };
  reattach_point point(0, 60s, std::move(handlers));
  point.master_gone();
  take_up(point, "not a record");
  take_up(point, "a record");
  EXPECT_EQ(record.get(), "a record");
}

TEST(reattach_point, an_empty_record_tells_the_worker_to_leave) {
  heard h;
  auto ended = h.expired.get_future();
  reattach_point point(0, 60s, h.handlers());
  point.master_gone();
  take_up(point, "");
  ended.wait();
  EXPECT_EQ(h.relinked.load(), 0);
}

TEST(reattach_point, a_process_of_another_user_is_refused_before_it_reads_a_byte) {
  if (::geteuid() != 0) GTEST_SKIP() << "switching to another user needs root, which this run does not have";
  heard h;
  auto record = h.record.get_future();
  reattach_point point(0, 60s, h.handlers());
  point.master_gone();
  pid_t other = ::fork();
  if (other == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    try {
      reattach_dial dial(point.name(), point.secret(), 5s, 1024);  // even with the secret
      dial.send("taken over");
      ::_exit(0);
    } catch (...) {
      ::_exit(1);
    }
  }
  int status = 0;
  ::waitpid(other, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1) << "another user's process took the worker up";
  EXPECT_EQ(h.relinked.load(), 0);
  take_up(point, "the run's own master");
  EXPECT_EQ(record.get(), "the run's own master");
}

// Over TCP (a cluster's worker, dialled by a master on another host): the same exchange, and one
// on the path learns nothing of it and cannot change it unseen.

/// A relay on the path between a master and a point: it accepts one connection on 127.0.0.1,
/// passes the bytes on both ways, keeps what it saw, and may flip one byte the master sends.
class relay_on_the_path {
 public:
  relay_on_the_path(const std::string& point_name, std::optional<std::size_t> flip_masters_byte = {})
      : flip_(flip_masters_byte) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(listener_, 1), 0);
    EXPECT_EQ(::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    name_ = "tcp:127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    auto colon = point_name.rfind(':');
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(static_cast<std::uint16_t>(std::stoul(point_name.substr(colon + 1))));
    thread_ = std::thread([this, to] { pass(to); });
  }
  ~relay_on_the_path() {
    thread_.join();
    ::close(listener_);
  }
  const std::string& name() const { return name_; }
  /// Everything that went by, both ways; once the exchange is over.
  std::string seen() {
    thread_.join();
    thread_ = std::thread([] {});
    return seen_;
  }

 private:
  void pass(sockaddr_in to) {
    int master = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    int point = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (master < 0 || ::connect(point, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) return;
    std::size_t from_master = 0;
    pollfd fds[2] = {{master, POLLIN, 0}, {point, POLLIN, 0}};
    for (;;) {
      if (::poll(fds, 2, 10000) <= 0) break;
      bool closed = false;
      for (int i = 0; i < 2; ++i) {
        if (!fds[i].revents) continue;
        char buf[4096];
        auto n = ::recv(fds[i].fd, buf, sizeof buf, 0);
        if (n <= 0) {
          closed = true;
          break;
        }
        if (i == 0 && flip_ && *flip_ >= from_master && *flip_ < from_master + static_cast<std::size_t>(n))
          buf[*flip_ - from_master] ^= 0x01;
        if (i == 0) from_master += static_cast<std::size_t>(n);
        seen_.append(buf, static_cast<std::size_t>(n));
        (void)!::send(fds[1 - i].fd, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL);
      }
      if (closed) break;
    }
    ::close(master);
    ::close(point);
  }
  std::optional<std::size_t> flip_;
  int listener_ = -1;
  std::string name_, seen_;
  std::thread thread_;
};

TEST(reattach_point, over_tcp_a_master_that_proves_the_secret_takes_the_worker_up) {
  heard h;
  auto record = h.record.get_future();
  reattach_point point(0, 60s, h.handlers("task 7: 3 results"), "127.0.0.1");
  ASSERT_TRUE(point.name().starts_with("tcp:127.0.0.1:")) << point.name();
  point.master_gone();
  reattach_dial dial(point.name(), point.secret(), 5s, 1024);
  EXPECT_EQ(dial.state(), "task 7: 3 results");
  EXPECT_EQ(dial.peer_pid(), 0) << "over TCP the kernel does not say who answers";
  dial.send("link to tcp://10.0.0.2:5555 as 42");
  EXPECT_EQ(record.get(), "link to tcp://10.0.0.2:5555 as 42");
}

// A worker elsewhere learns of its master's end from its link, heartbeat_timeout_ms later: the
// master taking the run up is taken at once, and the worker hears its last master is gone first.
TEST(reattach_point, over_tcp_a_master_that_proves_the_secret_is_taken_before_the_link_says_the_last_is_gone) {
  heard h;
  auto record = h.record.get_future();
  reattach_point point(0, 60s, h.handlers("task 9 running"), "127.0.0.1");
  reattach_dial dial(point.name(), point.secret(), 5s, 1024);
  EXPECT_EQ(dial.state(), "task 9 running");
  EXPECT_EQ(h.gone.load(), 1) << "the worker did not stop taking its last master's tasks before saying what it holds";
  dial.send("link to tcp://10.0.0.2:5555 as 7");
  EXPECT_EQ(record.get(), "link to tcp://10.0.0.2:5555 as 7");
}

// Anyone on the network can dial a TCP point: one that connects and says nothing does not keep
// the master taking the run up out (it proves the secret within its own patience, shorter than
// the silent caller's).
TEST(reattach_point, over_tcp_a_silent_caller_does_not_keep_the_master_out) {
  heard h;
  auto record = h.record.get_future();
  reattach_point point(0, 60s, h.handlers("held"), "127.0.0.1");
  auto port = static_cast<std::uint16_t>(std::stoi(point.name().substr(point.name().rfind(':') + 1)));
  std::vector<int> silent;
  for (int i = 0; i < 3; ++i) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to), 0);
    silent.push_back(fd);
  }
  reattach_dial dial(point.name(), point.secret(), 2s, 1024);
  EXPECT_EQ(dial.state(), "held");
  dial.send("the run's own master");
  EXPECT_EQ(record.get(), "the run's own master");
  for (int fd : silent) ::close(fd);
}

TEST(reattach_point, over_tcp_one_on_the_path_sees_neither_what_the_worker_holds_nor_its_record) {
  heard h;
  auto record = h.record.get_future();
  reattach_point point(0, 60s, h.handlers("RESULTS-THE-WORKER-HOLDS"), "127.0.0.1");
  point.master_gone();
  relay_on_the_path relay(point.name());
  {
    reattach_dial dial(relay.name(), point.secret(), 5s, 1024);
    EXPECT_EQ(dial.state(), "RESULTS-THE-WORKER-HOLDS");
    dial.send("THE-NEW-MASTERS-ADDRESS-AND-KEYS");
    EXPECT_EQ(record.get(), "THE-NEW-MASTERS-ADDRESS-AND-KEYS");
  }
  auto seen = relay.seen();
  EXPECT_GT(seen.size(), 100u) << "the relay saw the exchange";
  EXPECT_EQ(seen.find("RESULTS-THE-WORKER-HOLDS"), std::string::npos);
  EXPECT_EQ(seen.find("THE-NEW-MASTERS-ADDRESS-AND-KEYS"), std::string::npos);
  EXPECT_EQ(seen.find(point.secret()), std::string::npos);
}

TEST(reattach_point, over_tcp_a_record_changed_on_the_path_is_refused_and_the_worker_waits_for_the_next) {
  heard h;
  auto record = h.record.get_future();
  reattach_point point(0, 60s, h.handlers(), "127.0.0.1");
  point.master_gone();
  {
    // The master's bytes: its challenge (32), its proof (32), the record's length (4), the sealed
    // record: the one flipped is the record's first.
    relay_on_the_path relay(point.name(), 32 + 32 + 4);
    reattach_dial dial(relay.name(), point.secret(), 5s, 1024);
    dial.send("link to the attacker");
  }
  EXPECT_EQ(h.relinked.load(), 0) << "a changed record was taken";
  take_up(point, "the run's own master");
  EXPECT_EQ(record.get(), "the run's own master");
}

TEST(reattach_point, over_tcp_a_caller_without_the_secret_gets_nothing) {
  heard h;
  reattach_point point(0, 60s, h.handlers("held"), "127.0.0.1");
  point.master_gone();
  std::string wrong = point.secret();
  wrong[0] = wrong[0] == 'a' ? 'b' : 'a';
  EXPECT_THROW(reattach_dial(point.name(), wrong, 5s, 1024), std::system_error);
  EXPECT_EQ(h.relinked.load(), 0);
}

}  // namespace
