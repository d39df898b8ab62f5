// The event loop's hand-over: who runs the io_context while callers block, and where handlers run.
#include "runtime/event_loop.hpp"

#include <gtest/gtest.h>

#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include <sys/uio.h>
#include <unistd.h>

#include "fiber/error.hpp"
#include "transport/shared_lane.hpp"

namespace {
using fiber::detail::event_loop;

TEST(event_loop, a_blocking_caller_runs_the_handlers_itself) {
  event_loop loop(nullptr, /*standby=*/false);  // a worker's: only callers drive it
  std::atomic<bool> done{false};
  std::thread::id ran_on;
  asio::post(loop.io(), [&] {
    ran_on = std::this_thread::get_id();
    loop.notify_done(done);
  });
  loop.wait_until(done);
  EXPECT_EQ(ran_on, std::this_thread::get_id());  // no hop to another thread
}

TEST(event_loop, spinning_stops_after_spins_that_went_unanswered_and_returns_when_answers_are_quick) {
  event_loop loop(nullptr, /*standby=*/false, std::chrono::microseconds(1));
  auto answered_late = [&] {  // by a timer long after the spin
    std::atomic<bool> done{false};
    asio::steady_timer t(loop.io(), std::chrono::milliseconds(20));
    t.async_wait([&](std::error_code) { loop.notify_done(done); });
    loop.wait_until(done);
  };
  auto answered_at_once = [&] {  // by a handler already posted: within any spin
    std::atomic<bool> done{false};
    asio::post(loop.io(), [&] { loop.notify_done(done); });
    loop.wait_until(done);
  };
  EXPECT_TRUE(loop.spins_next_wait());
  for (int i = 0; i < event_loop::spin_misses_allowed; ++i) answered_late();
  EXPECT_FALSE(loop.spins_next_wait()) << "spins that went unanswered stop the spinning";
  unsigned waits = 0;
  while (!loop.spins_next_wait() && waits < 1000) {
    answered_at_once();  // no spin: the blocking run answers it
    ++waits;
  }
  EXPECT_EQ(waits, event_loop::spin_probe_every - 1) << "one wait in spin_probe_every spins again";
  answered_at_once();  // that spin is answered
  EXPECT_TRUE(loop.spins_next_wait());
  answered_at_once();
  EXPECT_TRUE(loop.spins_next_wait()) << "and the loop spins on";
}

TEST(event_loop, run_sync_from_another_thread_runs_on_the_loop_and_returns_its_exception) {
  event_loop loop(nullptr);
  bool on_loop = false;
  loop.run_sync([&] { on_loop = loop.in_loop_thread(); });
  EXPECT_TRUE(on_loop);
  EXPECT_THROW(loop.run_sync([] { throw std::runtime_error("from the loop"); }), std::runtime_error);
  loop.run_sync([&] { on_loop = loop.in_loop_thread(); });  // the loop goes on after a throw
  EXPECT_TRUE(on_loop);
}

TEST(event_loop, callers_on_many_threads_hand_the_loop_over_until_each_is_done) {
  event_loop loop(nullptr);
  constexpr int callers = 8, rounds = 200;
  std::vector<std::thread> threads;
  std::atomic<int> finished{0};
  for (int t = 0; t < callers; ++t)
    threads.emplace_back([&] {
      for (int r = 0; r < rounds; ++r) {
        std::atomic<bool> done{false};
        bool on_loop = false;
        // The operation starts on the loop and completes from a later handler, as a reply would.
        loop.drive(
            [&] {
              asio::post(loop.io(), [&] {
                on_loop = loop.in_loop_thread();
                loop.notify_done(done);
              });
            },
            done);
        EXPECT_TRUE(on_loop);
      }
      ++finished;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(finished.load(), callers);
}

// A caller blocked on a get while another thread puts what it waits for (or releases the GPU a
// starting child waits for): the second caller's operation must start although the first one
// holds the loop until its own is done.
TEST(event_loop, a_caller_waiting_for_another_callers_operation_does_not_keep_it_from_starting) {
  event_loop loop(nullptr);
  std::atomic<bool> first_done{false}, second_done{false}, first_driving{false};
  std::thread first([&] {
    loop.drive([&] { first_driving = true; }, first_done);  // done only once the second starts
  });
  while (!first_driving) std::this_thread::yield();  // the first caller holds the loop
  loop.drive(
      [&] {
        EXPECT_TRUE(loop.in_loop_thread());
        loop.notify_done(first_done);
        loop.notify_done(second_done);
      },
      second_done);
  first.join();
  EXPECT_TRUE(first_done.load());
}

TEST(event_loop, an_exception_from_a_start_handed_to_the_driving_caller_is_still_the_callers) {
  event_loop loop(nullptr);
  std::atomic<bool> first_done{false}, first_driving{false}, never{false};
  std::thread first([&] { loop.drive([&] { first_driving = true; }, first_done); });
  while (!first_driving) std::this_thread::yield();
  EXPECT_THROW(loop.drive([] { throw fiber::error(fiber::errc::closed, "refused"); }, never), fiber::error);
  loop.run_sync([&] { loop.notify_done(first_done); });
  first.join();
}

TEST(event_loop, an_exception_from_the_start_is_the_callers_and_frees_the_loop) {
  event_loop loop(nullptr);
  std::atomic<bool> never{false};
  EXPECT_THROW(loop.drive([] { throw fiber::error(fiber::errc::closed, "refused"); }, never), fiber::error);
  std::atomic<bool> done{false};
  asio::post(loop.io(), [&] { loop.notify_done(done); });
  loop.wait_until(done);  // another caller takes the loop
  EXPECT_TRUE(done.load());
}

TEST(event_loop, with_the_callers_io_context_nothing_runs_until_the_caller_runs_it) {
  asio::io_context io;
  event_loop loop(&io);
  EXPECT_FALSE(loop.owns_loop());
  bool ran = false;
  loop.run_or_post([&] { ran = true; });  // not this thread's loop: posted, not waited for
  EXPECT_FALSE(ran);
  io.run_one();
  EXPECT_TRUE(ran);

  std::atomic<bool> result{false};
  io.restart();  // it ran out of work above
  auto busy = asio::make_work_guard(io);  // run_one waits for the call rather than return idle
  std::thread caller([&] { loop.run_sync([&] { result = loop.in_loop_thread(); }); });
  io.run_one();  // the caller's loop runs the call
  caller.join();
  EXPECT_TRUE(result.load());
}

// A spin far longer than any test: what the spinning caller waits for must reach it while it
// polls (a bug here is a test that runs into ctest's timeout, not a slow one).
constexpr auto endless_spin = std::chrono::hours(1);

TEST(event_loop, a_spinning_caller_runs_handlers_and_timers_itself_and_returns_when_done) {
  event_loop loop(nullptr, /*standby=*/false, endless_spin);
  std::atomic<bool> done{false};
  std::thread::id ran_on;
  asio::steady_timer timer(loop.io(), std::chrono::milliseconds(5));
  loop.drive([&] {
    // A reply that comes after the caller began to poll: a timer, then a posted handler.
    timer.async_wait([&](std::error_code) {
      asio::post(loop.io(), [&] {
        ran_on = std::this_thread::get_id();
        loop.notify_done(done);
      });
    });
  }, done);
  EXPECT_TRUE(done.load());
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(event_loop, a_spinning_caller_hears_that_the_loop_stopped) {
  event_loop loop(nullptr, /*standby=*/false, endless_spin);
  std::atomic<bool> never{false};
  std::thread stopper;
  try {
    loop.drive([&] { stopper = std::thread([&] { loop.io().stop(); }); }, never);
    ADD_FAILURE() << "drive returned although its operation never completed";
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::closed);
  }
  stopper.join();
}

TEST(event_loop, spinning_callers_on_many_threads_still_hand_the_loop_over) {
  event_loop loop(nullptr, /*standby=*/true, endless_spin);
  std::vector<std::thread> threads;
  std::atomic<int> finished{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int r = 0; r < 100; ++r) {
        std::atomic<bool> done{false};
        loop.drive([&] { asio::post(loop.io(), [&] { loop.notify_done(done); }); }, done);
      }
      ++finished;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(finished.load(), 4);
}

TEST(event_loop, stop_runs_the_last_step_on_the_loop_once_and_ends_the_standby) {
  event_loop loop(nullptr);
  int runs = 0;
  bool on_loop = false;
  loop.stop([&] {
    ++runs;
    on_loop = loop.in_loop_thread();
  });
  loop.stop([&] { ++runs; });  // the standby is gone: a second stop runs here, without a loop
  EXPECT_EQ(runs, 2);
  EXPECT_TRUE(on_loop);
}

}  // namespace

namespace {
TEST(event_loop, a_spinning_caller_polls_its_shared_memory_links_so_their_peers_need_not_ring) {
  using fiber::detail::shared_channel;
  using fiber::detail::shared_lane;
  event_loop loop(nullptr, /*standby=*/false, std::chrono::seconds(600));  // spins until answered
  asio::io_context writer_io;
  auto made = shared_channel::make(shared_channel::min_capacity, false);
  ASSERT_NE(made, nullptr);
  auto joined = shared_channel::join(::dup(made->segment_fd()), ::dup(made->dialer_bell()), ::dup(made->acceptor_bell()), false);
  auto writer = shared_lane::open(writer_io, std::move(made));
  auto reader = shared_lane::open(loop.io(), std::move(joined));
  char got = 0;
  // The reader's callback takes a byte and ends the wait; the peer writes `byte` once the reader
  // says it sleeps (`sleeps`) or not (at most a minute, against a hang).
  auto exchange = [&](char byte, bool sleeps) {
    std::atomic<bool> done{false};
    reader->when_readable([&] {
      (void)reader->read(&got, 1);
      loop.notify_done(done);
    });
    std::thread peer([&] {
      auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
      while (writer->channel().peer_sleeps_for_read() != sleeps && std::chrono::steady_clock::now() < give_up)
        std::this_thread::yield();
      iovec iov{&byte, 1};
      EXPECT_EQ(writer->write(&iov, 1), 1u);
    });
    loop.wait_until(done);
    peer.join();
  };
  exchange('x', /*sleeps=*/false);  // written once the spin told the writer not to ring
  EXPECT_EQ(got, 'x');
  EXPECT_EQ(writer->channel().rings(), 0u) << "the spinning reader found the byte itself";
  loop.set_spin(std::chrono::microseconds(0));
  exchange('y', /*sleeps=*/true);  // before the loop blocks again, the reader asks to be rung
  EXPECT_EQ(got, 'y');
  EXPECT_EQ(writer->channel().rings(), 1u);
  writer->close();
  reader->close();
}
}  // namespace
