// A durable run's worker waiting for a new master (runtime/links/reattach_point) and the master
// dialling it (runtime/links/reattach_dial), over real abstract unix sockets and a real process
// standing for the master: the grace starts when that process ends (its pidfd) and ends the
// worker when nobody dials in; a master that proves the secret reads what the worker holds and
// hands it its record; a caller without the secret, or of another user, gets nothing and leaves
// the point waiting for the right one; an empty record tells the worker to leave.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <future>
#include <string>

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
  int relinked = 0, gone = 0;
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
  EXPECT_EQ(h.relinked, 0);
}

TEST(reattach_point, a_master_that_proves_the_secret_reads_what_the_worker_holds_and_hands_it_its_record) {
  heard h;
  auto record = h.record.get_future();
  reattach_point point(0, 60s, h.handlers("task 7: 3 results"));
  point.master_gone();
  reattach_dial dial(point.name(), point.secret(), 5s, 1024);
  EXPECT_EQ(h.gone, 1) << "the worker heard its master was gone before a dial was taken";
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
  EXPECT_EQ(h.relinked, 0);
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
  EXPECT_EQ(h.relinked, 0);
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
  EXPECT_EQ(h.relinked, 0);
  take_up(point, "the run's own master");
  EXPECT_EQ(record.get(), "the run's own master");
}

}  // namespace
