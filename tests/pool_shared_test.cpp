// fiber::shared<T> across processes, on every backend: a pool sends each worker an object once
// (on the master's host, one copy in shared memory that workers map), lets it go when its last
// handle goes, gives it to the replacement of a worker that died, and keeps objects of
// concurrent maps apart; a process's arguments, a queue's items and a task's result carry theirs
// whole. The codec and the frames in one process: shared_test.
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "co_test.hpp"
#include "pool_support.hpp"

namespace {
using theta_t = fiber::shared<std::vector<double>>;

double weighted(const theta_t& theta, std::uint64_t seed) {
  return std::accumulate(theta->begin(), theta->end(), 0.0) + static_cast<double>(seed);
}
// How many objects this worker holds for its master, after taking in this task's.
std::size_t held_objects(const theta_t&, int) { return fiber::detail::shared_held(); }
std::size_t held_now(int) { return fiber::detail::shared_held(); }
// The host a task ran on, after reading the model it holds.
std::string host_of(const fiber::shared<std::span<const float>>& w, std::uint64_t i, std::uint64_t die_at,
                    std::string marker) {
  if (i == die_at) (void)die_once(0, marker, SIGKILL);
  if ((*w)[i] != 2.0f) throw std::runtime_error("the model read wrong");
  // A host as shared memory sees it: its name and process namespace (containers on the host's
  // network share its name, not its processes).
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return std::string(name) + "/" + std::filesystem::read_symlink("/proc/self/ns/pid").string();
}
double span_sum(const fiber::shared<std::span<const float>>& w, std::uint64_t seed) {
  return std::accumulate(w->begin(), w->end(), 0.0) + static_cast<double>(seed);
}
double weighted_or_die_once(const theta_t& theta, std::uint64_t seed, std::uint64_t die_at, std::string marker) {
  if (seed == die_at) (void)die_once(0, marker, SIGKILL);
  return weighted(theta, seed);
}
// A worker that may not look into other processes (no CAP_SYS_PTRACE, which root otherwise
// has): it cannot open a non-dumpable master's /proc/<pid>/fd entries, so it cannot map the copy
// the master made in this host's memory.
void drop_ptrace_capability() {
  __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct caps[2]{};
  if (::syscall(SYS_capget, &head, caps) != 0) throw std::runtime_error("capget failed");
  for (auto& c : caps) {
    if (&c - caps != CAP_SYS_PTRACE / 32) continue;
    c.effective &= ~(1u << (CAP_SYS_PTRACE % 32));
    c.permitted &= ~(1u << (CAP_SYS_PTRACE % 32));
  }
  if (::syscall(SYS_capset, &head, caps) != 0) throw std::runtime_error("capset failed");
}
// A result that is a shared object of the worker's own: it travels back whole.
theta_t doubled(const theta_t& theta) {
  std::vector<double> v(*theta);
  for (auto& x : v) x *= 2;
  return fiber::share(std::move(v));
}
void check_sum(theta_t theta, double expected, fiber::simple_queue<theta_t> back) {
  if (weighted(theta, 0) != expected) throw std::runtime_error("the process got another object");
  back.put(theta).get();
}
}  // namespace
double plain_weighted(const std::vector<double>& theta, std::uint64_t seed) {
  return std::accumulate(theta.begin(), theta.end(), 0.0) + static_cast<double>(seed);
}
FIBER_REMOTE(weighted);
FIBER_REMOTE(plain_weighted);
FIBER_REMOTE(held_objects);
FIBER_REMOTE(held_now);
FIBER_REMOTE(span_sum);
FIBER_REMOTE(host_of);
FIBER_REMOTE(weighted_or_die_once);
FIBER_REMOTE(doubled);
FIBER_REMOTE(check_sum);
FIBER_REMOTE(drop_ptrace_capability);

namespace {
bool workers_on_this_host() { return fiber::context::default_context().config().backend == "local"; }

std::vector<std::tuple<theta_t, std::uint64_t>> items_of(const theta_t& theta, std::uint64_t n) {
  std::vector<std::tuple<theta_t, std::uint64_t>> items;
  for (std::uint64_t i = 0; i < n; ++i) items.emplace_back(theta, i);
  return items;
}
}  // namespace

TEST(pool_shared, each_worker_gets_an_object_once_however_many_items_chunks_and_maps_hold_it) {
  fiber::pool p(2);
  auto theta = fiber::share(std::vector<double>(300000, 0.25));  // 2.4 MB, sum 75000
  auto items = items_of(theta, 200);
  for (int round = 0; round < 3; ++round) {
    auto r = p.starmap(&weighted, items, 5).get();  // 40 chunks a map
    ASSERT_EQ(r.size(), items.size());
    for (std::size_t i = 0; i < r.size(); ++i) ASSERT_EQ(r[i], 75000.0 + static_cast<double>(i)) << round << " " << i;
  }
  auto s = p.stats();
  EXPECT_GE(s.shared_objects_sent, 1u);
  EXPECT_LE(s.shared_objects_sent, s.workers_started) << "once per worker, not per chunk (120) or item (600)";
  if (workers_on_this_host()) {
    // One copy in this host's memory, mapped by every worker: nothing of it in the messages.
    EXPECT_EQ(s.shared_bytes_host, theta.bytes());
    EXPECT_EQ(s.shared_bytes_sent, 0u);
  } else {
    // Whole to each worker, or once to a host whose other workers map the copy its first made.
    EXPECT_EQ(s.shared_bytes_sent % theta.bytes(), 0u);
    EXPECT_GE(s.shared_bytes_sent, theta.bytes());
    EXPECT_LE(s.shared_bytes_sent, s.shared_objects_sent * theta.bytes());
    EXPECT_EQ(s.shared_bytes_host, 0u);
  }
}

// A plain vector that every item holds by std::cref travels as a fiber::shared would: to each
// worker once per call, not in every chunk (which also made the master hold a copy per chunk).
TEST(pool_shared, a_vector_every_item_holds_by_reference_goes_to_each_worker_once) {
  fiber::pool p(2);
  const std::vector<double> theta(300000, 0.25);  // 2.4 MB, sum 75000
  std::vector<std::tuple<std::reference_wrapper<const std::vector<double>>, std::uint64_t>> items;
  for (std::uint64_t i = 0; i < 200; ++i) items.emplace_back(std::cref(theta), i);
  for (int round = 0; round < 2; ++round) {
    auto r = p.starmap(&plain_weighted, items, 5).get();  // 40 chunks a map
    ASSERT_EQ(r.size(), items.size());
    for (std::size_t i = 0; i < r.size(); ++i) ASSERT_EQ(r[i], 75000.0 + static_cast<double>(i)) << round << " " << i;
  }
  // A tuple that holds a const reference (the other natural form) is the same.
  std::vector<std::tuple<const std::vector<double>&, std::uint64_t>> refs;
  for (std::uint64_t i = 0; i < 200; ++i) refs.emplace_back(theta, i);
  auto r = p.starmap(&plain_weighted, refs, 5).get();
  for (std::size_t i = 0; i < r.size(); ++i) ASSERT_EQ(r[i], 75000.0 + static_cast<double>(i)) << i;
  auto s = p.stats();
  EXPECT_GE(s.shared_objects_sent, 1u) << "the vector went inside the chunks";
  EXPECT_LE(s.shared_objects_sent, 3 * s.workers_started) << "once per worker and call, not per chunk (120)";
}

// The master's host copy cannot be mapped (a real refusal: the kernel's, for a worker without
// CAP_SYS_PTRACE looking into a non-dumpable master): each worker asks for the object whole
// (`need`), gets it in the messages, and the items are right.
TEST(pool_shared, a_worker_that_cannot_map_the_hosts_copy_asks_for_the_object_whole) {
  if (!workers_on_this_host()) FIBER_TEST_BACKEND_GATED("the master's host copy is for workers on its host");
  struct dumpable_again {
    ~dumpable_again() { ::prctl(PR_SET_DUMPABLE, 1); }
  } restore;
  ASSERT_EQ(::prctl(PR_SET_DUMPABLE, 0), 0);
  fiber::pool p(fiber::pool_options{.processes = 2, .initializer = fiber::bind_remote(&drop_ptrace_capability)});
  auto theta = fiber::share(std::vector<double>(300000, 0.25));  // 2.4 MB: a host copy's worth
  auto items = items_of(theta, 40);
  for (int round = 0; round < 2; ++round) {
    auto r = p.starmap(&weighted, items, 2).get();
    ASSERT_EQ(r.size(), items.size());
    for (std::size_t i = 0; i < r.size(); ++i) ASSERT_EQ(r[i], 75000.0 + static_cast<double>(i)) << round << " " << i;
  }
  auto s = p.stats();
  EXPECT_EQ(s.shared_bytes_host, theta.bytes()) << "the copy was made";
  // Whole, once to each worker that ran a task (not again in the second map), where mapping it
  // would have sent nothing.
  EXPECT_GE(s.shared_bytes_sent, theta.bytes());
  EXPECT_EQ(s.shared_bytes_sent % theta.bytes(), 0u);
  EXPECT_LE(s.shared_bytes_sent, s.workers_started * theta.bytes());
}

TEST(pool_shared, a_small_object_goes_in_the_messages_even_on_the_masters_host) {
  fiber::pool p(1);
  auto theta = fiber::share(std::vector<double>(10000, 0.25));  // 80 KB: under a memfd's worth
  EXPECT_EQ(p.starmap(&weighted, items_of(theta, 10), 2).get().back(), 2509.0);
  auto s = p.stats();
  EXPECT_EQ(s.shared_objects_sent, 1u);
  EXPECT_EQ(s.shared_bytes_sent, theta.bytes());
  EXPECT_EQ(s.shared_bytes_host, 0u);
}

TEST(pool_shared, a_span_handle_is_read_in_place_by_every_worker) {
  fiber::pool p(2);
  std::vector<float> model(1 << 19, 2.0f);  // 2 MB
  auto w = fiber::share(std::span<const float>(model));
  std::vector<std::tuple<fiber::shared<std::span<const float>>, std::uint64_t>> items;
  for (std::uint64_t i = 0; i < 40; ++i) items.emplace_back(w, i);
  auto r = p.starmap(&span_sum, items, 3).get();
  for (std::size_t i = 0; i < r.size(); ++i) ASSERT_EQ(r[i], double(1 << 20) + static_cast<double>(i)) << i;
  EXPECT_LE(p.stats().shared_objects_sent, p.stats().workers_started);
}

TEST(pool_shared, workers_let_go_of_an_object_once_its_last_handle_in_the_master_goes) {
  fiber::pool p(1);
  {
    auto theta = fiber::share(std::vector<double>(20000, 1.0));
    auto r = p.starmap(&held_objects, std::vector<std::tuple<theta_t, int>>{{theta, 0}, {theta, 1}}).get();
    EXPECT_EQ(r, (std::vector<std::size_t>{1, 1}));
  }
  // The handle went: the worker lets the object go before it runs anything after that.
  EXPECT_EQ(p.map(&held_now, std::vector<int>{0, 1, 2}).get(), (std::vector<std::size_t>{0, 0, 0}));
  auto again = fiber::share(std::vector<double>(20000, 1.0));
  EXPECT_EQ(p.apply(&held_objects, again, 0).get(), 1u) << "a new object is a new one to send";
  EXPECT_EQ(p.stats().shared_objects_sent, 2u);
}

TEST(pool_shared, the_replacement_of_a_worker_that_died_gets_the_object) {
  fiber::pool p(fiber::pool_options{.processes = 1});
  auto marker = marker_path("shared-died");
  auto theta = fiber::share(std::vector<double>(10000, 0.25));  // sum 2500
  std::vector<std::tuple<theta_t, std::uint64_t, std::uint64_t, std::string>> batch;
  for (std::uint64_t i = 0; i < 20; ++i) batch.emplace_back(theta, i, 7, marker);
  auto sums = p.starmap(&weighted_or_die_once, batch, 4).get();
  ASSERT_EQ(sums.size(), batch.size());
  for (std::size_t i = 0; i < sums.size(); ++i) EXPECT_EQ(sums[i], 2500.0 + static_cast<double>(i)) << i;
  auto s = p.stats();
  EXPECT_EQ(s.workers_lost, 1u);
  EXPECT_EQ(s.shared_objects_sent, 2u) << "to the worker that died and to its replacement";
  std::filesystem::remove(marker);
}

TEST(pool_shared, concurrent_maps_with_different_objects_each_read_their_own) {
  fiber::pool p(2);
  auto a = fiber::share(std::vector<double>(30000, 1.0));  // sum 30000
  auto b = fiber::share(std::vector<double>(30000, 2.0));  // sum 60000
  auto ra = p.starmap_async(&weighted, items_of(a, 100), 3);
  auto rb = p.starmap_async(&weighted, items_of(b, 100), 3);
  auto mixed = items_of(a, 100);
  for (std::size_t i = 1; i < mixed.size(); i += 2) std::get<0>(mixed[i]) = b;
  auto rm = p.starmap_async(&weighted, mixed, 7);
  auto va = std::move(ra).get();
  auto vb = std::move(rb).get();
  auto vm = std::move(rm).get();
  for (std::size_t i = 0; i < 100; ++i) {
    ASSERT_EQ(va[i], 30000.0 + static_cast<double>(i));
    ASSERT_EQ(vb[i], 60000.0 + static_cast<double>(i));
    ASSERT_EQ(vm[i], (i % 2 ? 60000.0 : 30000.0) + static_cast<double>(i));
  }
  EXPECT_LE(p.stats().shared_objects_sent, 2 * p.stats().workers_started);
}

TEST(pool_shared, objects_past_shared_cache_bytes_fail_their_items_naming_the_key) {
  fiber::context ctx(fiber::config::load({{"shared_cache_bytes", "100000"}}));
  fiber::pool p(ctx, 1);
  auto small = fiber::share(std::vector<double>(10000, 1.0));  // 80 KB: fits
  auto big = fiber::share(std::vector<double>(20000, 1.0));    // 160 KB: does not
  EXPECT_EQ(p.apply(&weighted, small, 1).get(), 10001.0);
  fiber_test::expect_error([&] { (void)p.apply(&weighted, big, 1).get(); }, fiber::errc::shared_cache_full,
                           {"shared_cache_bytes", "let go of handles"});
  auto second = fiber::share(std::vector<double>(5000, 1.0));  // 40 KB beside the 80 KB in use: too much
  fiber_test::expect_error([&] { (void)p.apply(&weighted, second, 1).get(); }, fiber::errc::shared_cache_full,
                           "shared_cache_bytes");
  small = {};
  EXPECT_EQ(p.apply(&weighted, second, 1).get(), 5001.0) << "the bytes of a handle let go are free again";
}

TEST(pool_shared, a_result_a_process_argument_and_a_queue_item_carry_their_object_whole) {
  fiber::pool p(1);
  auto theta = fiber::share(std::vector<double>(10000, 0.5));  // sum 5000
  auto twice = p.apply(&doubled, theta).get();
  EXPECT_EQ(weighted(twice, 0), 10000.0);

  fiber::simple_queue<theta_t> back;
  fiber::process proc(&check_sum, theta, 5000.0, back);
  proc.start().get();
  auto returned = back.get().get();
  proc.join().get();
  EXPECT_EQ(proc.exitcode(), 0);
  EXPECT_EQ(*returned, *theta);
}

// Slurm's two nodes hold several workers each: the first worker of a node gets the object whole
// and copies it into its node's memory, the others map that copy (or wait until it is made). The
// master sends two copies at most: the first workers of further hosts fetch it from a worker that
// has it. A container or a pod is a host of its own (its processes cannot see the others'): the
// six containers or pods of the Docker and Kubernetes runs get two copies from the master and
// fetch four. On the master's host the master's copy is mapped.
TEST(pool_shared, a_large_object_leaves_the_master_at_most_twice_and_survives_the_death_of_a_worker_holding_it) {
  fiber::pool p(6);  // more than one Slurm node's 4 CPUs: both nodes
  p.ready().get();
  std::vector<float> model(1 << 19, 2.0f);  // 2 MB
  auto w = fiber::share(std::span<const float>(model));
  auto marker = marker_path("shared-holder");
  for (std::uint64_t die_at : {std::uint64_t(1000), std::uint64_t(3)}) {  // the second map kills a worker
    std::vector<std::tuple<fiber::shared<std::span<const float>>, std::uint64_t, std::uint64_t, std::string>> items;
    for (std::uint64_t i = 0; i < 64; ++i) items.emplace_back(w, i, die_at, marker);
    auto before = p.stats().shared_bytes_sent;
    auto hosts = p.starmap(&host_of, items, 1).get();
    ASSERT_EQ(hosts.size(), 64u);
    if (die_at == 1000) {
      std::set<std::string> distinct(hosts.begin(), hosts.end());
      if (workers_on_this_host())
        EXPECT_EQ(p.stats().shared_bytes_sent - before, 0u);
      else
        EXPECT_EQ(p.stats().shared_bytes_sent - before, std::min<std::size_t>(distinct.size(), 2) * w.bytes())
            << "the master sends two copies at most; the other " << distinct.size() - std::min<std::size_t>(distinct.size(), 2)
            << " host(s) fetch it from a worker that has it";
    }
  }
  EXPECT_EQ(p.stats().workers_lost, 1u);
  std::filesystem::remove(marker);
}
