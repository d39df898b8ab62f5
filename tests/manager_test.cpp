// fiber::manager and fiber::async_manager: objects in a real server process, called through proxies.
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "co_test.hpp"
#include "support.hpp"

namespace {
struct span_stamps {
  std::int64_t start = 0, end = 0;  // steady_clock, the same clock in every process of the machine
};

std::int64_t now_ns() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

class counter {
 public:
  explicit counter(int start) : n_(start) {}
  counter(std::string label, int start) : label_(std::move(label)), n_(start) {}
  int add(int k) { return n_ += k; }
  int value() const { return n_; }
  void reset() noexcept { n_ = 0; }
  std::string describe(const std::string& prefix, double scale) const {
    return prefix + label_ + "=" + std::to_string(static_cast<int>(n_ * scale));
  }
  std::vector<double> scaled(std::vector<double> v, double f) {
    for (auto& x : v) x *= f;
    return v;
  }
  span_stamps work(int ms) {
    span_stamps s{now_ns(), 0};
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));  // the call's work
    s.end = now_ns();
    return s;
  }
  // A barrier of calls in other processes: leaves its mark in `folder`, then waits until `n` marks
  // are there, and says how many it saw. Calls that ran one after the other never meet: the
  // first sees only its own mark when the bound on a hang (a minute) ends its wait.
  int meet(std::string folder, int n) {
    std::ofstream(folder + "/" + std::to_string(getpid()) + "-" + std::to_string(now_ns())) << "";
    auto bound = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    int seen = 0;
    while ((seen = static_cast<int>(std::distance(std::filesystem::directory_iterator(folder), {}))) < n &&
           std::chrono::steady_clock::now() < bound)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return seen;
  }
  int fail(std::string why) { throw std::invalid_argument(why); }
  int pid() { return getpid(); }

 private:
  std::string label_;
  int n_ = 0;
};

struct throws_in_constructor {
  explicit throws_in_constructor(int) { throw std::runtime_error("no such environment"); }
  int nothing() { return 0; }
};

}  // namespace
FIBER_REMOTE_CLASS(counter, add, value, reset, describe, scaled, work, meet, fail, pid);
FIBER_REMOTE_CLASS(throws_in_constructor, nothing);

namespace {
void append_from_child(fiber::managed_list<int> list, fiber::proxy<counter> c, int x) {
  list.append(x).get();
  c.add(x).get();
}
}  // namespace
FIBER_REMOTE(append_from_child);

namespace {
void add_from_child(fiber::proxy<counter> c) { (void)c.add(1).get(); }
}  // namespace
FIBER_REMOTE(add_from_child);

TEST(manager, registered_class_with_methods_of_several_signatures) {
  fiber::manager mgr;
  auto c = mgr.create<counter>("apples", 5).get();
  EXPECT_EQ(c.add(3).get(), 8);
  EXPECT_EQ(c.value().get(), 8);
  EXPECT_EQ(c.describe("n:", 2.0).get(), "n:apples=16");
  EXPECT_EQ(c.scaled(std::vector<double>(20000, 1.5), 2.0).get(), std::vector<double>(20000, 3.0));  // large frames
  c.reset().get();
  EXPECT_EQ(c.value().get(), 0);
  if (!fiber_test::on_docker() && !fiber_test::on_kubernetes()) {  // a container's pid is its namespace's
    EXPECT_NE(c.pid().get(), getpid());
    EXPECT_EQ(c.pid().get(), mgr.pid());
  }
  EXPECT_GT(mgr.pid(), 0);
  // Another constructor, another object: each has its own state.
  auto d = mgr.create<counter>(100).get();
  EXPECT_EQ(d.add(1).get(), 101);
  EXPECT_EQ(c.value().get(), 0);
}

TEST(manager, remote_exceptions_come_back_with_type_and_message) {
  fiber::manager mgr;
  auto c = mgr.create<counter>(0).get();
  fiber_test::expect_error([&] { (void)c.fail("bad action").get(); }, fiber::errc::remote_error,
                           {"std::invalid_argument", "bad action", "Manager-"});
  EXPECT_EQ(c.add(1).get(), 1);  // the object and the server go on
  fiber_test::expect_error([&] { (void)mgr.create<throws_in_constructor>(1).get(); }, fiber::errc::remote_error,
                           {"std::runtime_error", "no such environment"});
}

TEST(manager, async_handles_read_out_of_order_each_get_their_own_result) {
  fiber::async_manager mgr;
  auto c = mgr.create<counter>(0).get();
  auto h1 = c.add(1);
  auto h2 = c.add(10);
  auto h3 = c.add(100);
  EXPECT_EQ(std::move(h3).get(), 111);
  EXPECT_EQ(std::move(h1).get(), 1);
  EXPECT_EQ(std::move(h2).get(), 11);
}

TEST(manager, unread_async_handles_neither_shift_later_results_nor_stay_behind) {
  fiber::async_manager mgr;
  auto c = mgr.create<counter>(0).get();
  for (int i = 0; i < 100; ++i) (void)c.add(1);  // never read
  EXPECT_EQ(c.value().get(), 100);              // every call ran, in order, and this result is this call's
  auto h = c.add(5);
  EXPECT_EQ(std::move(h).get(), 105);
}

TEST(manager, four_async_calls_on_four_managers_run_at_the_same_time) {
  std::vector<fiber::async_manager> managers(4);
  std::vector<fiber::proxy<counter>> envs;
  for (auto& m : managers) envs.push_back(m.create<counter>(0).get());
  auto folder = fiber_test::run_folder() / "meet";
  std::filesystem::create_directories(folder);
  std::vector<fiber::op<int>> handles;
  for (auto& e : envs) handles.push_back(e.meet(folder.string(), 4));
  for (auto& h : handles) EXPECT_EQ(std::move(h).get(), 4) << "every call was running while the others were";
}

// Managers that are locals of a coroutine on the caller's io_context, the ordinary shape in a
// service: the coroutine ends, its managers go (asking their servers to stop), and the context is
// stopped after that (FIBER_CO_TEST stops it when the body has finished). The master still held
// the servers' jobs by raw pointer after their objects were gone, and the stop read them: SIGSEGV.
FIBER_CO_TEST(manager, managers_that_were_locals_of_a_coroutine_leave_nothing_to_crash_on_when_the_context_stops) {
  {
    fiber::async_manager m(ctx);
    auto c = co_await m.create<counter>(0);
    EXPECT_EQ(co_await c.add(2), 2);
  }
  {
    fiber::manager m(ctx);
    auto c = co_await m.create<counter>(1);
    EXPECT_EQ(co_await c.add(2), 3);
  }
}

TEST(manager, sync_calls_on_one_manager_run_one_after_the_other) {
  fiber::manager mgr;
  auto c = mgr.create<counter>(0).get();
  auto a = c.work(20).get();
  auto b = c.work(20).get();
  EXPECT_LE(a.end, b.start);
}

TEST(manager, builtin_list) {
  fiber::manager mgr;
  auto l = mgr.list<std::string>().get();
  l.append("a").get();
  l.extend({"b", "c"}).get();
  EXPECT_EQ(l.size().get(), 3u);
  EXPECT_EQ(l.get(-1).get(), "c");
  l.set(0, "z").get();
  EXPECT_EQ(l.items().get(), (std::vector<std::string>{"z", "b", "c"}));
  EXPECT_EQ(l.pop().get(), "c");
  fiber_test::expect_error([&] { (void)l.get(5).get(); }, fiber::errc::remote_error, {"out_of_range", "list index 5"});
  l.clear().get();
  fiber_test::expect_error([&] { (void)l.pop().get(); }, fiber::errc::remote_error, {"pop from an empty list"});
}

TEST(manager, builtin_dict) {
  fiber::manager mgr;
  auto d = mgr.dict<std::string, std::vector<int>>().get();
  d.set("x", {1, 2}).get();
  d.set("y", {3}).get();
  EXPECT_EQ(d.get("x").get(), (std::vector<int>{1, 2}));
  EXPECT_EQ(d.get("nope").get(), std::nullopt);
  EXPECT_TRUE(d.contains("y").get());
  EXPECT_TRUE(d.erase("y").get());
  EXPECT_FALSE(d.erase("y").get());
  EXPECT_EQ(d.size().get(), 1u);
  auto items = d.items().get();
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].first, "x");
}

TEST(manager, builtin_namespace) {
  fiber::manager mgr;
  auto ns = mgr.make_namespace().get();
  ns.set("lr", 0.25).get();
  ns.set("name", std::string("run-1")).get();
  EXPECT_EQ(ns.get<double>("lr").get(), 0.25);
  EXPECT_EQ(ns.get<std::string>("name").get(), "run-1");
  EXPECT_EQ(ns.names().get(), (std::vector<std::string>{"lr", "name"}));
  fiber_test::expect_error([&] { (void)ns.get<int>("epochs").get(); }, fiber::errc::remote_error, {"'epochs'", "set it first"});
  fiber_test::expect_error([&] { (void)ns.get<std::string>("lr").get(); }, fiber::errc::malformed_message, {"disagree on the type"});
}

TEST(manager, builtin_queue_get_waits_without_blocking_other_calls) {
  fiber::async_manager mgr;
  auto q = mgr.queue<int>().get();
  auto l = mgr.list<int>().get();
  auto waiting = q.get();             // parked on the server
  l.append(7).get();                  // the server still answers other calls
  EXPECT_EQ(q.try_get().get(), std::nullopt);
  q.put(42).get();
  EXPECT_EQ(std::move(waiting).get(), 42);
  q.put(1).get();
  EXPECT_EQ(q.size().get(), 1u);
  EXPECT_EQ(q.get().get(), 1);
}

TEST(manager, proxies_passed_to_a_child_work_there) {
  fiber::manager mgr;
  auto list = mgr.list<int>().get();
  auto c = mgr.create<counter>(0).get();
  std::vector<fiber::process> children;
  for (int i = 1; i <= 3; ++i) children.emplace_back(&append_from_child, list, c, i);
  for (auto& p : children) p.start().get();
  for (auto& p : children) p.join().get();
  for (auto& p : children) EXPECT_FALSE(p.exception()) << p.exception()->what();
  auto items = list.items().get();
  std::sort(items.begin(), items.end());
  EXPECT_EQ(items, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(c.value().get(), 6);
}

TEST(manager, server_killed_mid_call_fails_pending_and_later_calls) {
  if (fiber_test::on_kubernetes()) FIBER_TEST_BACKEND_GATED("kills the server by its pid on this host; a pod's pid is its own namespace's");
  fiber::async_manager mgr;
  mgr.ready().get();
  auto q = mgr.queue<int>().get();
  auto c = mgr.create<counter>(0).get();
  auto pending = q.get();  // waits on the server forever
  ASSERT_EQ(::kill(mgr.pid(), SIGKILL), 0);
  fiber_test::expect_error([&] { (void)std::move(pending).get(); }, fiber::errc::server_lost, {"killed by signal 9"});
  fiber_test::expect_error([&] { (void)c.add(1).get(); }, fiber::errc::server_lost, {"objects it hosted are gone"});
}

TEST(manager, destroying_the_manager_stops_its_server) {
  int pid = 0;
  fiber::proxy<counter> c;
  {
    fiber::manager mgr;
    c = mgr.create<counter>(0).get();
    pid = mgr.pid();
    ASSERT_GT(pid, 0);
  }
  if (!fiber_test::on_kubernetes())  // a pod's pid names no process on this host
    EXPECT_NE(::kill(pid, 0), 0) << "the server process is gone";
  fiber_test::expect_error([&] { (void)c.add(1).get(); }, fiber::errc::server_lost, {"shut down"});
}

TEST(manager, a_child_calling_a_manager_that_is_gone_is_told_so_not_left_waiting) {
  fiber::proxy<counter> c;
  {
    fiber::manager mgr;
    c = mgr.create<counter>(0).get();
  }
  // The call goes to the master, which no longer has the manager: it answers service_gone.
  fiber::process p(&add_from_child, c);
  p.start().get();
  p.join().get();
  ASSERT_TRUE(p.exception());
  EXPECT_EQ(p.exception()->type(), "fiber::error");
  EXPECT_NE(p.exception()->message().find("has been shut down: its objects are gone"), std::string::npos)
      << p.exception()->what();
}

TEST(manager, released_objects_are_gone_from_the_server) {
  fiber::manager mgr;
  fiber::managed_list<int> copy_in_child_form;
  {
    auto l = mgr.list<int>().get();
    l.append(1).get();
    // What a child would get: the name of the object, not ownership.
    fiber::writer w;
    w.value(l);
    std::vector<std::span<const std::byte>> none;
    fiber::reader r({reinterpret_cast<const std::byte*>(w.head().data()), w.head().size()}, none);
    copy_in_child_form = r.value<fiber::managed_list<int>>();
    EXPECT_EQ(copy_in_child_form.size().get(), 1u);
  }
  fiber_test::expect_error([&] { (void)copy_in_child_form.size().get(); }, fiber::errc::closed, {"was released"});
}

TEST(manager, oversized_arguments_and_results_are_clear_errors) {
  fiber::context ctx(fiber::config::load({{"max_message_bytes", "100000"}}));
  fiber::manager mgr(ctx);
  auto c = mgr.create<counter>(0).get();
  fiber_test::expect_error([&] { (void)c.scaled(std::vector<double>(20000, 1.0), 1.0).get(); },
                           fiber::errc::message_too_large, {"arguments", "max_message_bytes"});
  auto list = mgr.list<std::string>().get();
  for (int i = 0; i < 3; ++i) list.append(std::string(40000, 'x')).get();
  fiber_test::expect_error([&] { (void)list.items().get(); }, fiber::errc::message_too_large,
                           {"result", "max_message_bytes"});
  EXPECT_EQ(list.size().get(), 3u);  // nothing hangs, the server goes on
  mgr.shutdown().get();
  ctx.stop();
}

// A server the backend cannot even spawn (its engine is unreachable): calls fail with the reason,
// and shutting the manager down returns (it waited for the end of a server that never ran).
TEST(manager, a_server_that_cannot_be_spawned_fails_calls_and_shutdown_returns) {
  const char* saved = std::getenv("DOCKER_HOST");
  std::string before = saved ? saved : "";
  ::setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock", 1);
  {
    fiber::context ctx(fiber::config::load({{"backend", "docker"}, {"image", "any-image"}}));
    {
      fiber::manager mgr(ctx);
      fiber_test::expect_error([&] { (void)mgr.create<counter>(0).get(); }, fiber::errc::server_lost,
                               {"could not start", "DOCKER_HOST"});
      mgr.shutdown().get();
    }  // and its destructor returns too
    ctx.stop();
  }
  if (saved)
    ::setenv("DOCKER_HOST", before.c_str(), 1);
  else
    ::unsetenv("DOCKER_HOST");
}

TEST(manager, empty_proxy_is_a_clear_error) {
  fiber::proxy<counter> c;
  fiber_test::expect_error([&] { (void)c.add(1); }, fiber::errc::not_started, {"empty proxy"});
}

namespace {
asio::awaitable<int> step_twice(fiber::proxy<counter> c) {
  EXPECT_EQ(co_await c.add(2), 12);
  co_return co_await c.add(3);
}
}  // namespace

FIBER_CO_TEST(manager, awaitable_from_the_callers_io_context) {
  fiber::manager mgr(ctx);
  auto c = co_await mgr.create<counter>(10);
  EXPECT_EQ(co_await step_twice(c), 15);
  co_await mgr.shutdown();
}

