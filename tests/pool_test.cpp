// fiber::pool: map, imap, starmap, apply and their async forms, options, needs, resizing, bad input,
// and the pool on a caller's io_context. Failures and recovery: pool_recovery_test.
#include "co_test.hpp"
#include "pool_support.hpp"

TEST(pool, map_of_3_and_1000_items) {
  fiber::pool p(2);
  EXPECT_EQ(p.map(&square, std::vector<int>{1, 2, 3}).get(), (std::vector<int>{1, 4, 9}));
  std::vector<int> xs(1000);
  std::iota(xs.begin(), xs.end(), 0);
  auto ys = p.map(&square, xs).get();
  ASSERT_EQ(ys.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(ys[i], i * i);
}

TEST(pool, map_of_nothing_and_of_void_functions) {
  fiber::pool p(2);
  EXPECT_TRUE(p.map(&square, std::vector<int>{}).get().empty());
  EXPECT_EQ(p.map(&nothing, std::vector<int>{1, 2}).get().size(), 2u);
}

TEST(pool, large_arguments_and_results_mixed_with_small_ones_and_errors) {
  fiber::pool p(2);
  std::vector<std::vector<double>> xs{std::vector<double>(50000, 1.0), {1.0, 2.0}, std::vector<double>(3, 1.0),
                                      std::vector<double>(20000, 3.0), {}};
  auto stream = p.imap(&scale_big, xs, 5);  // one chunk holds them all
  EXPECT_EQ(stream.next().get(), std::vector<double>(50000, 2.0));
  EXPECT_EQ(stream.next().get(), (std::vector<double>{2.0, 4.0}));
  fiber_test::expect_error([&] { (void)stream.next().get(); }, fiber::errc::remote_error, "three is not allowed");
  EXPECT_EQ(stream.next().get(), std::vector<double>(20000, 6.0));
  EXPECT_EQ(stream.next().get(), std::vector<double>{});
  EXPECT_EQ(stream.next().get(), std::nullopt);
}

// Given by std::move, the items are the pool's: the caller's vector is empty at once, and the
// large data of each item goes to the workers from the pool's copy (chunks fed one item at a time,
// long after the call returned), not from storage the caller still owns.
TEST(pool, a_map_given_its_items_by_move_keeps_them_until_every_chunk_is_done) {
  fiber::pool p(2);
  std::vector<std::vector<double>> xs;
  for (int i = 0; i < 12; ++i) xs.push_back(std::vector<double>(40000, static_cast<double>(i)));
  auto call = p.map(&scale_big, std::move(xs), 1);
  EXPECT_TRUE(xs.empty());  // NOLINT(bugprone-use-after-move): what the move left is the point
  auto ys = std::move(call).get();
  ASSERT_EQ(ys.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(ys[i], std::vector<double>(40000, 2.0 * i)) << "item " << i;

  // map_async too: submitted at once, its items the pool's from the call on.
  for (int i = 0; i < 6; ++i) xs.push_back(std::vector<double>(40000, static_cast<double>(i)));
  auto later = p.map_async(&scale_big, std::move(xs), 1);
  EXPECT_TRUE(xs.empty());  // NOLINT(bugprone-use-after-move)
  auto zs = std::move(later).get();
  ASSERT_EQ(zs.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(zs[i], std::vector<double>(40000, 2.0 * i)) << "item " << i;
}

TEST(pool, apply_with_arguments) {
  fiber::pool p(2);
  EXPECT_EQ(p.apply(&add, 40, 2).get(), 42);
  // Move-only arguments are moved into the call, awaited or waited for, at once or later.
  EXPECT_EQ(p.apply(&length_of, std::make_unique<std::string>("moved")).get(), 5u);
  EXPECT_EQ(p.apply_async(&length_of, std::make_unique<std::string>("later")).get(), 5u);
}

TEST(pool, starmap_with_chunksize_1_and_10) {
  fiber::pool p(2);
  std::vector<std::tuple<int, int>> args;
  for (int i = 0; i < 100; ++i) args.emplace_back(i, 2 * i);
  for (std::size_t chunk : {1, 10}) {
    auto r = p.starmap(&add, args, chunk).get();
    ASSERT_EQ(r.size(), 100u);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(r[i], 3 * i) << chunk;
  }
}

TEST(pool, imap_keeps_order) {
  fiber::pool p(3);
  std::vector<int> xs{30, 1, 20, 2, 10, 3};  // slower tasks first: arrival order differs
  auto stream = p.imap(&sleep_ms, xs);
  std::vector<int> got;
  while (auto v = stream.next().get()) got.push_back(*v);
  EXPECT_EQ(got, xs);
}

TEST(pool, imap_in_a_range_for) {
  fiber::pool p(2);
  std::vector<int> xs{3, 1, 2};
  std::vector<int> got;
  for (int y : p.imap(&square, xs)) got.push_back(y);
  EXPECT_EQ(got, (std::vector<int>{9, 1, 4}));
  std::vector<int> bad{1, 20, 3};
  auto stream = p.imap(&fail_on_multiples_of_20, bad);
  auto it = stream.begin();
  EXPECT_EQ(*it, 1);
  fiber_test::expect_error([&] { ++it; }, fiber::errc::remote_error, "multiple of 20");
}

TEST(pool, imap_unordered_returns_everything) {
  fiber::pool p(3);
  std::vector<int> xs(50);
  std::iota(xs.begin(), xs.end(), 0);
  auto stream = p.imap_unordered(&square, xs, 4);
  std::multiset<int> got;
  while (auto v = stream.next().get()) got.insert(*v);
  std::multiset<int> expected;
  for (int x : xs) expected.insert(x * x);
  EXPECT_EQ(got, expected);
}

TEST(pool, async_handles_are_awaited_in_any_order) {
  fiber::pool p(2);
  auto a = p.apply_async(&add, 1, 2);
  auto b = p.map_async(&square, std::vector<int>{4, 5});
  auto c = p.starmap_async(&add, std::vector<std::tuple<int, int>>{{1, 1}, {2, 2}});
  EXPECT_EQ(std::move(c).get(), (std::vector<int>{2, 4}));
  EXPECT_EQ(std::move(a).get(), 3);
  EXPECT_EQ(std::move(b).get(), (std::vector<int>{16, 25}));
}

TEST(pool, five_thousand_apply_async_of_1ms_in_rounds_of_5) {
  fiber::pool p(4);
  int total = 0;
  for (int round = 0; round < 1000; ++round) {
    std::vector<fiber::op<int>> handles;
    for (int i = 0; i < 5; ++i) handles.push_back(p.apply_async(&sleep_ms, 1));
    for (auto& h : handles) total += std::move(h).get();
  }
  EXPECT_EQ(total, 5000);
}

TEST(pool, tasks_talking_over_queues_with_chunksize_1_do_not_deadlock_and_spread_over_workers) {
  fiber::pool p(4);
  p.ready().get();
  fiber::simple_queue<std::string> arrived;
  fiber::simple_queue<int> release;
  std::vector<std::tuple<int, fiber::simple_queue<std::string>, fiber::simple_queue<int>>> args;
  for (int i = 0; i < 4; ++i) args.emplace_back(i, arrived, release);
  auto all = p.starmap_async(&meet, args, 1);
  std::set<std::string> workers;
  for (int i = 0; i < 4; ++i) workers.insert(arrived.get().get());
  EXPECT_EQ(workers.size(), 4u);  // four tasks ran at once, one on each worker
  for (int i = 0; i < 4; ++i) release.put(i).get();
  auto r = std::move(all).get();
  std::sort(r.begin(), r.end());
  EXPECT_EQ(r, (std::vector<int>{0, 1, 2, 3}));
}

TEST(pool, every_worker_gets_a_fair_share) {
  fiber::pool p(4);
  p.ready().get();
  std::vector<int> xs(400, 0);
  auto workers = p.map(&my_name, xs, 1).get();
  std::map<std::string, int> per_worker;
  for (auto& w : workers) ++per_worker[w];
  EXPECT_EQ(per_worker.size(), 4u);
}

TEST(pool, initializer_runs_in_every_worker) {
  fiber::pool p(fiber::pool_options{.processes = 2, .initializer = fiber::bind_remote(&set_value, 17)});
  auto r = p.map(&read_value, std::vector<int>(10, 0), 1).get();
  EXPECT_EQ(r, std::vector<int>(10, 17));
}

// The items of a chunk are written by one writer, so the parameters they share travel once per
// chunk; the worker must read them with one table of shared objects, in order.
TEST(pool, items_sharing_an_object_get_it_whole_however_they_are_chunked) {
  fiber::pool p(2);
  auto theta = std::make_shared<const std::vector<double>>(10000, 0.25);  // 80 KB, sum 2500
  std::vector<std::tuple<std::shared_ptr<const std::vector<double>>, std::uint64_t>> batch;
  for (std::uint64_t i = 0; i < 64; ++i) batch.emplace_back(theta, i);
  for (std::size_t chunksize : {1, 7, 16, 64}) {
    auto fitness = p.starmap(&perturbed_sum, batch, chunksize).get();
    ASSERT_EQ(fitness.size(), batch.size());
    for (std::size_t i = 0; i < fitness.size(); ++i) EXPECT_EQ(fitness[i], 2500.0 + static_cast<double>(i)) << i;
  }
}

// The same vector held by reference (the natural C++ form): under a megabyte it travels once per
// chunk (larger, once per worker: pool_shared_test).
TEST(pool, items_holding_one_vector_by_reference_get_it_whole_however_they_are_chunked) {
  fiber::pool p(2);
  const std::vector<double> theta(10000, 0.25);
  std::vector<std::tuple<const std::vector<double>&, std::uint64_t, std::uint64_t, std::string>> batch;
  for (std::uint64_t i = 0; i < 64; ++i) batch.emplace_back(theta, i, 1000, "");  // 1000: no item dies
  for (std::size_t chunksize : {1, 7, 16, 64}) {
    auto sums = p.starmap(&sum_or_die_once, batch, chunksize).get();
    ASSERT_EQ(sums.size(), batch.size());
    for (std::size_t i = 0; i < sums.size(); ++i) EXPECT_EQ(sums[i], 2500.0 + static_cast<double>(i)) << i;
  }
  // Through std::cref, the same.
  std::vector<std::tuple<std::reference_wrapper<const std::vector<double>>, std::uint64_t, std::uint64_t, std::string>> crefs;
  for (std::uint64_t i = 0; i < 64; ++i) crefs.emplace_back(std::cref(theta), i, 1000, "");
  auto sums = p.starmap(&sum_or_die_once, crefs, 16).get();
  ASSERT_EQ(sums.size(), crefs.size());
  for (std::size_t i = 0; i < sums.size(); ++i) EXPECT_EQ(sums[i], 2500.0 + static_cast<double>(i)) << i;
}

TEST(pool, maxtasksperchild_replaces_workers) {
  fiber::pool p(fiber::pool_options{.processes = 2, .maxtasksperchild = 1});
  auto workers = p.map(&my_name, std::vector<int>(6, 0), 1).get();
  EXPECT_EQ(std::set<std::string>(workers.begin(), workers.end()).size(), 6u);
  EXPECT_EQ(p.stats().workers_lost, 0u);
}

TEST(pool, a_function_needing_more_than_the_workers_have_gets_new_workers_started_with_its_needs) {
  FIBER_TEST_LOCAL_ONLY("the test's Docker engine has no GPUs (docker_backend tests check the request)");
  fiber::pool p(2);
  auto plain = p.map(&where_plain, std::vector<int>(8, 0), 1).get();
  EXPECT_EQ(gpus_of(plain), std::set<std::string>{"none"});
  auto gpu = p.map(&where_gpu, std::vector<int>(8, 0), 1).get();
  const std::set<std::string> devices{"0", "1"};  // the test's gpus (test_main.cpp)
  for (auto& d : gpus_of(gpu)) EXPECT_TRUE(devices.count(d)) << "a task ran seeing " << d;
  for (auto& pid : workers_of(gpu)) EXPECT_FALSE(workers_of(plain).count(pid)) << "ran on a worker without a GPU";
  // Plain work runs on whichever workers cover it: the GPU workers, or one started without a GPU
  // that is not retired yet (each retires as a GPU worker connects, so the pool never shrinks
  // for workers that might not start).
  // (The first map may have run on one of the two first workers alone, so the other may show
  // up only now: what counts is that no third worker without a GPU appears.)
  auto after = p.map(&where_plain, std::vector<int>(8, 0), 1).get();
  auto without_gpu = workers_of(plain);
  for (auto& w : after) {
    auto pid = w.substr(0, w.find(' '));
    if (devices.count(w.substr(w.find(' ') + 1))) continue;
    EXPECT_FALSE(workers_of(gpu).count(pid)) << w;
    without_gpu.insert(pid);
  }
  EXPECT_LE(without_gpu.size(), 2u) << "plain work ran on a worker started after the GPU workers";
  p.close();
  p.join().get();
  auto s = p.stats();
  EXPECT_EQ(s.workers_lost, 0u);
  EXPECT_EQ(s.workers_started, 4u);  // two without a GPU, two with one: each replaced once
}

TEST(pool, work_needing_more_than_any_node_has_fails_at_once_and_the_workers_stay) {
  FIBER_TEST_LOCAL_ONLY("the test's host has the two GPUs of its config; each backend's check has its own test");
  fiber::pool p(2);
  auto before = p.map(&where_plain, std::vector<int>(8, 0), 1).get();
  // The test's config gives this host two GPUs (test_main.cpp).
  fiber_test::expect_error([&] { (void)p.map(&where_three_gpus, std::vector<int>(4, 0)).get(); },
                           fiber::errc::unsatisfiable, {"asks for 3 GPUs and this host has 2"});
  // Nothing was retired for workers that could never start: the same two workers go on (a
  // replacement would make a third; the first map may have run on one worker alone).
  auto after = p.map(&where_plain, std::vector<int>(8, 0), 1).get();
  auto seen = workers_of(before);
  seen.merge(workers_of(after));
  EXPECT_LE(seen.size(), 2u) << "workers were replaced";
  EXPECT_EQ(gpus_of(after), std::set<std::string>{"none"});
  p.close();
  p.join().get();
  EXPECT_EQ(p.stats().workers_lost, 0u);
}

TEST(pool, workers_started_with_needs_from_the_options_run_such_functions_at_once) {
  FIBER_TEST_LOCAL_ONLY("the test's Docker engine has no GPUs (docker_backend tests check the request)");
  fiber::pool p(fiber::pool_options{.processes = 2, .needs = {.gpu = 1}});
  auto plain = p.map(&where_plain, std::vector<int>(8, 0), 1).get();
  auto gpu = p.map(&where_gpu, std::vector<int>(8, 0), 1).get();
  // Each worker has a device of its own.
  std::map<std::string, std::string> device_of;
  for (auto& w : plain) device_of[w.substr(0, w.find(' '))] = w.substr(w.find(' ') + 1);
  std::set<std::string> devices;
  for (auto& [pid, d] : device_of) devices.insert(d);
  EXPECT_EQ(devices.size(), device_of.size()) << "two workers share a device";
  for (auto& d : devices) EXPECT_TRUE(d == "0" || d == "1") << d;
  // A replacement would bring a third pid: the two workers would have been retired.
  auto all = workers_of(plain);
  all.merge(workers_of(gpu));
  EXPECT_LE(all.size(), 2u) << "a worker was replaced although it had the needs";
  EXPECT_EQ(p.stats().workers, 2u);
}

TEST(pool, resize_while_working_loses_nothing) {
  fiber::pool p(2);
  std::vector<int> xs(100, 1);
  auto work = p.map_async(&sleep_ms, xs, 1);
  p.resize(1);
  p.resize(3);
  EXPECT_EQ(std::move(work).get(), xs);
  EXPECT_EQ(p.stats().workers, 3u);
}

TEST(pool, imap_over_a_long_input_keeps_a_bounded_number_of_tasks) {
  fiber::pool p(2);
  auto xs = std::views::iota(0, 200000);
  auto stream = p.imap(&square, xs, 100);
  std::size_t most = 0;
  for (int i = 0; i < 200000; ++i) {
    auto v = stream.next().get();
    ASSERT_TRUE(v);
    ASSERT_EQ(*v, square(i));
    if (i % 5000 == 0) {
      auto s = p.stats();
      most = std::max(most, s.queued + s.running);
    }
  }
  EXPECT_EQ(stream.next().get(), std::nullopt);
  // Queued: at most the feeding window (workers x credit x 2 chunks); running: at most the
  // workers' credit (workers x 2 chunks); chunks of 100.
  EXPECT_LE(most, (2u * 2u * 2u + 2u * 2u) * 100u);
}

TEST(pool, close_join_and_misuse) {
  fiber::pool p(2);
  EXPECT_EQ(p.apply(&square, 2).get(), 4);
  fiber_test::expect_error([&] { p.join().get(); }, fiber::errc::not_started, "close");
  p.close();
  fiber_test::expect_error([&] { (void)p.map(&square, std::vector<int>{1}); }, fiber::errc::closed);
  fiber_test::expect_error([&] { (void)p.apply_async(&square, 1); }, fiber::errc::closed);
  p.join().get();
  EXPECT_EQ(p.stats().workers, 0u);
}

TEST(pool, bad_input) {
  fiber_test::expect_error([] { fiber::pool p(0); }, fiber::errc::config_error, "at least 1");
  fiber_test::expect_error([] { fiber::pool p(-1); }, fiber::errc::config_error, "processes");
  {
    fiber::pool automatic;  // cpu_count() workers
    automatic.ready().get();
    EXPECT_EQ(automatic.stats().workers, static_cast<std::size_t>(fiber::cpu_count()));
  }
  fiber::pool p(1);
  fiber_test::expect_error([&] { (void)p.apply(&fiber_test_unregistered, 1); }, fiber::errc::not_registered,
                           "FIBER_REMOTE");
}

TEST(pool, oversized_arguments_and_results_fail_their_task_with_a_clear_error) {
  fiber::context ctx(fiber::config::load({{"max_message_bytes", "100000"}}));
  {
    fiber::pool p(ctx, fiber::pool_options{.processes = 1});
    fiber_test::expect_error([&] { (void)p.apply(&make_big, 200000).get(); }, fiber::errc::message_too_large,
                             {"results", "max_message_bytes", "100000"});
    EXPECT_EQ(p.apply(&make_big, 10).get().size(), 10u);  // the worker and the pool go on
    fiber_test::expect_error([&] { (void)p.apply(&scale_big, std::vector<double>(20000, 1.0)).get(); },
                             fiber::errc::message_too_large, {"arguments", "max_message_bytes"});
    // A map's chunk over the limit: its first item's error is the map's answer, and the rest of
    // its input is read no further (the master once crashed here).
    std::vector<std::vector<double>> bigs(6, std::vector<double>(8000, 1.0));  // 64 kB each
    fiber_test::expect_error([&] { (void)p.map(&scale_big, bigs, 2).get(); }, fiber::errc::message_too_large,
                             {"arguments of a chunk", "smaller chunksize"});
    EXPECT_EQ(p.map(&square, std::vector<int>{1, 2}).get(), (std::vector<int>{1, 4}));
    EXPECT_EQ(p.stats().workers_lost, 0u);
  }
  ctx.stop();
}

FIBER_CO_TEST(pool, awaitable_on_the_callers_io_context) {
  fiber::pool p(ctx, {.processes = 2});
  co_await p.ready();
  std::vector<int> xs{1, 2, 3};
  auto out = co_await p.map(&square, xs);
  out.push_back(co_await p.apply(&add, 1, 1));
  // Submitted from a handler of the loop itself: at once, without waiting for the loop.
  auto submitted = p.apply_async(&add, 2, 2);
  out.push_back(co_await std::move(submitted));
  EXPECT_EQ(out, (std::vector<int>{1, 4, 9, 2, 4}));
  co_await p.terminate();
}

namespace {
asio::awaitable<void> map_then_stop(fiber::pool& p, fiber::context& ctx, std::vector<int>& out) {
  std::vector<int> xs{1, 2, 3};
  out = co_await p.map(&square, xs);
  ctx.stop();
}
}  // namespace

TEST(pool, built_before_the_callers_io_context_runs) {
  asio::io_context io;
  fiber::context ctx(io);
  fiber::pool p(ctx, 2);  // nobody runs `io` yet: this must not wait for it
  std::vector<int> result;
  asio::co_spawn(io, map_then_stop(p, ctx, result), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  io.run();
  EXPECT_EQ(result, (std::vector<int>{1, 4, 9}));
}

TEST(pool, progress_line_on_a_terminal) {
  int master = -1, slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  int saved = dup(2);
  dup2(slave, 2);  // stderr is a terminal now
  {
    fiber::pool p(fiber::pool_options{.processes = 2, .progress = true});
    std::vector<int> xs(100, 1);
    EXPECT_EQ(p.map(&square, xs).get(), xs);
    // The line is drawn on the next tick after the map finished, then ended with a newline.
    std::string out;
    pollfd pf{master, POLLIN, 0};
    while (out.find('\n') == std::string::npos && poll(&pf, 1, 30000) == 1) {  // bounded: a guard only
      char buf[256];
      auto n = read(master, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    dup2(saved, 2);
    EXPECT_NE(out.find("[fiber pool] 100 of 100 done"), std::string::npos) << out;
  }
  dup2(saved, 2);
  close(saved);
  close(slave);
  close(master);
}

// A pool built on a thread that then ends keeps its workers (they were killed with the thread).
TEST(pool, a_pool_built_on_a_thread_that_ended_keeps_its_workers) {
  std::optional<fiber::pool> p;
  fiber_test::run_on_a_thread_that_ends([&] {
    p.emplace(2);
    EXPECT_EQ(p->map(&square, std::vector<int>{1, 2, 3}).get(), (std::vector<int>{1, 4, 9}));
  });
  EXPECT_EQ(p->map(&square, std::vector<int>{4, 5}).get(), (std::vector<int>{16, 25}));
  EXPECT_EQ(p->stats().workers_lost, 0u);
}

// A backend that cannot be made (here Docker without an image, refused before any engine is
// asked) fails the pool where it is made, with the backend's words.
TEST(pool, a_backend_that_cannot_be_made_fails_the_pool_with_its_words) {
  fiber::context ctx(fiber::config::load({{"backend", "docker"}, {"image", ""}}));
  fiber_test::expect_error([&] { fiber::pool p(ctx, 1); }, fiber::errc::config_error,
                           {"backend=docker needs an image", "FIBER_IMAGE"});
}
