// The run's live page (runtime/observe/dashboard, config dashboard): its token, what its state says
// during a run against pool::stats(), the events it streams, and its errors. The page itself, in
// a browser, is dashboard_browser_test's.
#include <asio/connect.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/read_until.hpp>
#include <asio/write.hpp>
#include <boost/json.hpp>
#include <fiber/fiber.hpp>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <map>
#include <string>

#include "core/flight_recorder.hpp"
#include "support.hpp"

namespace {
int wait_for(int x, fiber::simple_queue<int> gate) {
  (void)gate.get().get();
  return x;
}
int triple(int x) { return 3 * x; }
int kill_myself(int) {
  ::raise(SIGKILL);
  return 0;
}
}  // namespace
namespace {
/// A master of its own: a pool of two runs four items held on `gate`; how many came back goes out.
void pool_in_a_child(fiber::simple_queue<int> gate, fiber::simple_queue<int> out) {
  fiber::pool p(2);
  std::vector<std::tuple<int, fiber::simple_queue<int>>> args;
  for (int i = 0; i < 4; ++i) args.emplace_back(i, gate);
  out.put(static_cast<int>(p.starmap(&wait_for, args, 1).get().size())).get();
}
/// A master of its own that is killed while its pool holds four items on `gate`.
void pool_then_killed(fiber::simple_queue<int> gate, fiber::simple_queue<int> die) {
  fiber::pool p(2);
  std::vector<std::tuple<int, fiber::simple_queue<int>>> args;
  for (int i = 0; i < 4; ++i) args.emplace_back(i, gate);
  auto held = p.starmap_async(&wait_for, args, 1);
  (void)die.get().get();
  ::raise(SIGKILL);
}
}  // namespace
FIBER_REMOTE(wait_for);
FIBER_REMOTE(pool_in_a_child);
FIBER_REMOTE(pool_then_killed);
FIBER_REMOTE(kill_myself);
FIBER_REMOTE(triple);

namespace {

struct url_parts {
  std::string host, port, token;
};
url_parts parse(const std::string& url) {
  // http://HOST:PORT/?token=T
  auto rest = url.substr(std::string("http://").size());
  auto colon = rest.find(':'), slash = rest.find('/');
  return {rest.substr(0, colon), rest.substr(colon + 1, slash - colon - 1), rest.substr(rest.find("token=") + 6)};
}

struct answer {
  int status = 0;
  std::string head, body;
};

/// One GET with a blocking socket, read to its end.
answer get(const std::string& host, const std::string& port, const std::string& target, const std::string& method = "GET") {
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  asio::connect(s, asio::ip::tcp::resolver(io).resolve(host, port));
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n";
  asio::write(s, asio::buffer(req));
  std::string all;
  std::error_code ec;
  asio::read(s, asio::dynamic_buffer(all), ec);
  answer a;
  auto end = all.find("\r\n\r\n");
  a.head = all.substr(0, end);
  a.body = end == std::string::npos ? "" : all.substr(end + 4);
  a.status = std::stoi(all.substr(all.find(' ') + 1, 3));
  return a;
}

boost::json::object state_of(const url_parts& u) {
  auto a = get(u.host, u.port, "/state?token=" + u.token);
  EXPECT_EQ(a.status, 200) << a.body;
  return boost::json::parse(a.body).as_object();
}

std::uint64_t num(const boost::json::value& v) { return v.to_number<std::uint64_t>(); }

fiber::config with_dashboard(std::vector<std::pair<std::string, std::string>> more = {}) {
  more.emplace_back("dashboard", "true");
  more.emplace_back("dashboard_interval_ms", "50");
  return fiber::config::load(more);
}

/// The dashboard's events (GET /events), read one by one: each is a sample the master took.
struct event_reader {
  explicit event_reader(const url_parts& u) : socket(io) {
    asio::connect(socket, asio::ip::tcp::resolver(io).resolve(u.host, u.port));
    asio::write(socket, asio::buffer("GET /events?token=" + u.token + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    auto n = asio::read_until(socket, asio::dynamic_buffer(in), "\r\n\r\n");
    head = in.substr(0, n);
    in.erase(0, n);
  }
  boost::json::object next() {
    for (;;) {
      auto end = asio::read_until(socket, asio::dynamic_buffer(in), "\n\n");
      auto event = in.substr(0, end);
      in.erase(0, end);
      if (event.rfind("data: ", 0) == 0) return boost::json::parse(event.substr(6)).as_object();
    }
  }
  asio::io_context io;
  asio::ip::tcp::socket socket;
  std::string head, in;
};

/// The first of the dashboard's samples that says what `pred` wants (waiting on its events, each
/// a sample; the test's timeout bounds the wait).
template <class Pred>
boost::json::object state_when(const url_parts& u, Pred pred) {
  event_reader events(u);
  for (;;) {
    auto s = events.next();
    if (pred(s)) return s;
  }
}

/// The state's one pool (an empty object before the pool's start has been sampled).
boost::json::object pool_in(const boost::json::object& s) {
  auto& pools = s.at("pools").as_array();
  EXPECT_LE(pools.size(), 1u);
  return pools.empty() ? boost::json::object{{"stats", boost::json::object{}}, {"failures", boost::json::array{}}}
                       : pools[0].as_object();
}

/// An IPv4 address of this host that is not its loopback (empty when it has none).
std::string another_address_of_this_host() {
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return {};
  std::string found;
  for (auto* a = all; a && found.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text);
    if (std::string_view(text).rfind("127.", 0) != 0) found = text;
  }
  ::freeifaddrs(all);
  return found;
}

}  // namespace

TEST(dashboard, off_by_default) {
  fiber::context ctx(fiber::config::load({{"dashboard", "false"}}));
  EXPECT_EQ(ctx.dashboard_url(), "");
}

TEST(dashboard, its_url_is_on_this_host_with_a_long_random_token) {
  fiber::context a(with_dashboard()), b(with_dashboard());
  auto ua = parse(a.dashboard_url()), ub = parse(b.dashboard_url());
  EXPECT_EQ(ua.host, "127.0.0.1");
  EXPECT_EQ(ua.token.size(), 32u);
  EXPECT_NE(ua.token, ub.token);
  EXPECT_NE(ua.port, ub.port);
}

TEST(dashboard, nothing_is_served_without_the_token) {
  fiber::context ctx(with_dashboard());
  auto u = parse(ctx.dashboard_url());
  for (std::string target : std::vector<std::string>{"/", "/state", "/events", "/?token=", "/state?token=" + u.token.substr(0, 31),
                             "/state?token=" + u.token + "0", "/state?token=" + std::string(32, '0'), "/nothing"}) {
    auto a = get(u.host, u.port, target);
    EXPECT_EQ(a.status, 403) << target;
    EXPECT_NE(a.body.find("needs the token of its run"), std::string::npos) << a.body;
    EXPECT_EQ(a.body.find(u.token), std::string::npos);
  }
  auto page = get(u.host, u.port, "/?token=" + u.token);
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.head.find("Content-Type: text/html"), std::string::npos);
  EXPECT_NE(page.head.find("Cache-Control: no-store"), std::string::npos);
  EXPECT_NE(page.body.find("<title>fiber run</title>"), std::string::npos);
  EXPECT_EQ(get(u.host, u.port, "/other?token=" + u.token).status, 404);
  EXPECT_EQ(get(u.host, u.port, "/state?token=" + u.token, "DELETE").status, 405);
}

TEST(dashboard, it_listens_on_this_host_only_by_default) {
  auto other = another_address_of_this_host();
  if (other.empty()) GTEST_SKIP() << "this host has no address but its loopback";
  fiber::context ctx(with_dashboard());
  auto u = parse(ctx.dashboard_url());
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  std::error_code ec;
  s.connect({asio::ip::make_address(other), static_cast<unsigned short>(std::stoi(u.port))}, ec);
  EXPECT_EQ(ec, asio::error::connection_refused) << "connected through " << other;
}

TEST(dashboard, a_port_taken_is_a_clear_error_naming_the_keys) {
  fiber::context first(with_dashboard());
  auto port = parse(first.dashboard_url()).port;
  try {
    fiber::context second(with_dashboard({{"dashboard_port", port}}));
    FAIL() << "a second dashboard listened on port " << port;
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::config_error);
    std::string what = e.what();
    EXPECT_NE(what.find("port " + port), std::string::npos) << what;
    EXPECT_NE(what.find("dashboard_port"), std::string::npos) << what;
  }
}

TEST(dashboard, its_numbers_are_the_pools_stats_during_a_run) {
  fiber::context ctx(with_dashboard());
  auto u = parse(ctx.dashboard_url());
  fiber::simple_queue<int> gate(ctx);
  fiber::pool p(ctx, 2);
  std::vector<std::tuple<int, fiber::simple_queue<int>>> args;
  for (int i = 0; i < 6; ++i) args.emplace_back(i, gate);
  auto all = p.starmap_async(&wait_for, args, 1);
  p.ready().get();  // both workers connected (on a cluster, pods take a while): they have their items
  // Workers hold a chunk beyond the one they run (their credit), so what is held moves as items
  // finish: each settled point (all released items done, the rest waiting on the gate) is
  // compared whole.
  for (int released = 0; released <= 6; released += 2) {
    fiber::pool_stats want;
    auto s = state_when(u, [&](const boost::json::object& st) {
      want = p.stats();
      auto pool = pool_in(st);
      auto& stats = pool.at("stats").as_object();
      return stats.contains("done") && want.done == static_cast<std::size_t>(released) &&
             want.queued + want.running + want.done == 6 && num(stats.at("done")) == want.done &&
             num(stats.at("running")) == want.running && num(stats.at("queued")) == want.queued;
    });
    auto pool = pool_in(s);
    auto& stats = pool.at("stats").as_object();
    EXPECT_EQ(num(stats.at("retried")), want.retried);
    EXPECT_EQ(num(stats.at("workers")), want.workers);
    EXPECT_EQ(num(stats.at("workers_started")), want.workers_started);
    auto& totals = s.at("totals").as_object();
    EXPECT_EQ(num(totals.at("done")), want.done);
    EXPECT_EQ(num(totals.at("running")), want.running);
    EXPECT_EQ(num(totals.at("queued")), want.queued);
    // The workers' rows add up to what is running, each busy one holding some.
    std::size_t held = 0;
    auto& workers = pool.at("workers").as_array();
    EXPECT_EQ(workers.size(), 2u);
    for (auto& w : workers) {
      auto items = num(w.at("items"));
      held += items;
      EXPECT_EQ(w.at("state").as_string(), items ? "busy" : "idle");
      EXPECT_GT(w.at("pid").to_number<int>(), 0);
    }
    EXPECT_EQ(held, want.running);
    if (released < 6) {
      gate.put(0).get();
      gate.put(0).get();
    }
  }
  EXPECT_EQ(std::move(all).get().size(), 6u);
  auto s = state_of(u);
  EXPECT_EQ(s.at("run").as_string(), ctx.job_id());
  EXPECT_GE(s.at("processes").at("running").to_number<int>(), 2);  // the pool's workers
}

TEST(dashboard, events_carry_each_sample_as_it_is_taken) {
  fiber::context ctx(with_dashboard());
  auto u = parse(ctx.dashboard_url());
  fiber::pool p(ctx, 1);
  event_reader events(u);
  EXPECT_NE(events.head.find("200 OK"), std::string::npos) << events.head;
  EXPECT_NE(events.head.find("Content-Type: text/event-stream"), std::string::npos) << events.head;
  EXPECT_EQ(events.head.find("Content-Length"), std::string::npos) << events.head;
  // A pool's work shows in the events that follow it, without asking again.
  auto first = events.next();
  EXPECT_EQ(first.at("run").as_string(), ctx.job_id());
  p.map(&triple, std::vector<int>(10, 3)).get();
  // /state is taken when asked: the map's end is in it at once.
  EXPECT_EQ(num(pool_in(state_of(u)).at("stats").at("done")), 10u);
  for (;;) {
    auto e = events.next();
    auto& pools = e.at("pools").as_array();
    if (!pools.empty() && num(pools[0].at("stats").at("done")) == 10) break;
  }
  SUCCEED();
}

TEST(dashboard, a_lost_worker_is_a_failure_with_how_it_ended) {
  fiber::context ctx(with_dashboard());
  auto u = parse(ctx.dashboard_url());
  fiber::pool p(ctx, {.processes = 1, .retry = false});
  EXPECT_THROW(p.map(&kill_myself, std::vector<int>{1}).get(), fiber::error);
  auto s = state_when(u, [](const boost::json::object& st) {
    auto pool = pool_in(st);
    return !pool.at("failures").as_array().empty();
  });
  auto failure = std::string(pool_in(s).at("failures").as_array()[0].at("what").as_string());
  EXPECT_NE(failure.find("signal 9"), std::string::npos) << failure;
  EXPECT_NE(failure.find("holding 1 item(s)"), std::string::npos) << failure;
  EXPECT_EQ(num(s.at("totals").at("workers_lost")), 1u);
}

// Each worker's resident memory beside its limit: the limit in what it asked for, the memory as
// the worker last recorded it.
TEST(dashboard, a_workers_resident_memory_is_shown_beside_its_limit) {
  fiber::context ctx(with_dashboard({{"record_memory_ms", "50"}}));
  auto u = parse(ctx.dashboard_url());
  fiber::pool p(ctx, {.processes = 1, .needs = {.memory_mb = 300}});
  p.ready().get();
  auto s = state_when(u, [](const boost::json::object& st) {
    for (auto& row : st.at("processes").at("list").as_array())
      if (row.as_object().contains("memory") && row.as_object().contains("resources")) return true;
    return false;
  });
  for (auto& row : s.at("processes").at("list").as_array()) {
    auto& r = row.as_object();
    if (!r.contains("memory")) continue;
    EXPECT_NE(std::string(r.at("resources").as_string()).find("300 MB"), std::string::npos) << r.at("resources");
    auto memory = std::string(r.at("memory").as_string());
    EXPECT_GT(std::stoul(memory), 0u) << memory;
    EXPECT_LT(std::stoul(memory), 300u) << memory << ": an idle worker under its limit";
  }
}

// A worker its engine has not started yet is "waiting", with the engine's reason: a Slurm job that
// may not begin for an hour, a pod no node's labels match (with kubernetes_autoscaling, which
// waits for nodes instead of failing).
TEST(dashboard, a_worker_its_engine_holds_back_is_waiting_with_the_engines_reason) {
  std::vector<std::pair<std::string, std::string>> held_back;
  std::string reason;
  if (fiber_test::on_slurm()) {
    held_back = {{"slurm_sbatch_args", "--begin=now+1hour"}};
    reason = "BeginTime";
  } else if (fiber_test::on_kubernetes()) {
    held_back = {{"kubernetes_autoscaling", "true"},
                 {"kubernetes_pod_patch", R"({"spec":{"nodeSelector":{"fiber-test":"no-such-node"}}})"}};
    reason = "Unschedulable";
  } else {
    FIBER_TEST_BACKEND_GATED("the " << fiber_test::backend_under_test() << " backend starts a worker at once: nothing holds one back");
  }
  auto dir = fiber_test::run_folder() / ("fiber-dash-rec-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  held_back.emplace_back("record_dir", dir.string());
  std::string worker;
  {
    fiber::context ctx(with_dashboard(held_back));
    auto u = parse(ctx.dashboard_url());
    fiber::pool p(ctx, 1);
    auto s = state_when(u, [&](const boost::json::object& st) {
      auto pool = pool_in(st);
      auto* workers = pool.if_contains("workers");
      if (!workers || workers->as_array().empty()) return false;
      auto& w = workers->as_array()[0].as_object();
      return w.contains("pending") && std::string(w.at("pending").as_string()).find(reason) != std::string::npos;
    });
    auto pool = pool_in(s);
    auto& w = pool.at("workers").as_array()[0].as_object();
    EXPECT_EQ(w.at("state").as_string(), "waiting");
    EXPECT_EQ(num(w.at("items")), 0u);
    EXPECT_EQ(p.stats().workers_started, 1u);
    worker = std::string(w.at("name").as_string());
  }
  // The run's recording says so too: the engine's reason, on the worker's process.
  std::vector<std::filesystem::path> files;
  for (auto& f : std::filesystem::directory_iterator(dir)) files.push_back(f.path());
  ASSERT_EQ(files.size(), 1u);
  std::map<std::uint32_t, std::string> names;
  std::vector<std::string> pending_of_worker;
  for (auto& [r, text] : fiber::detail::read_flight_file(files[0].string())) {
    if (r.kind == fiber::detail::record_kind::name) names[r.a] = text;
    if (r.kind == fiber::detail::record_kind::process_pending && names[r.a] == worker) pending_of_worker.push_back(text);
  }
  EXPECT_TRUE(std::any_of(pending_of_worker.begin(), pending_of_worker.end(),
                          [&](const std::string& t) { return t.find(reason) != std::string::npos; }))
      << worker << " pended with: " << (pending_of_worker.empty() ? std::string("nothing") : pending_of_worker.back());
  std::filesystem::remove_all(dir);
}

namespace {
/// The pool that runs in process `in` (a master of its own), or null.
const boost::json::object* pool_of(const boost::json::object& s, const std::string& in) {
  for (auto& p : s.at("pools").as_array())
    if (auto* where = p.as_object().if_contains("in"); where && where->as_string() == in) return &p.as_object();
  return nullptr;
}

/// The state once the pool of process `in` has its two workers holding its four items, none done
/// (each runs one and holds one: its credit).
boost::json::object when_its_pool_holds_four(const url_parts& u, const std::string& in) {
  return state_when(u, [&](const boost::json::object& st) {
    auto* p = pool_of(st, in);
    return p && num(p->at("stats").at("workers")) == 2 && num(p->at("stats").at("running")) == 4;
  });
}
}  // namespace

// A child that runs a pool is a master of its own: its pool is on the run's page, by its place in
// the tree, its numbers in the run's totals, until it says it ended.
TEST(dashboard, a_childs_pool_is_on_the_runs_page_by_its_place_in_the_tree) {
  fiber::context ctx(with_dashboard());
  auto u = parse(ctx.dashboard_url());
  fiber::simple_queue<int> gate(ctx), out(ctx);
  fiber::process child(ctx, &pool_in_a_child, gate, out);
  child.start().get();
  auto s = when_its_pool_holds_four(u, child.name());
  auto& pool = *pool_of(s, child.name());
  EXPECT_EQ(num(pool.at("number")), 1u);
  EXPECT_EQ(pool.at("state").as_string(), "open");
  EXPECT_EQ(pool.at("workers").as_array().size(), 2u);
  EXPECT_EQ(num(s.at("totals").at("running")), 4u);  // the run's only pool
  for (int i = 0; i < 4; ++i) gate.put(0).get();
  EXPECT_EQ(out.get().get(), 4);
  child.join().get();
  EXPECT_EQ(child.exitcode(), 0);
  // Ended, with its last numbers (they may come after its process's end is seen).
  auto ended = state_when(u, [&](const boost::json::object& st) {
    auto* p = pool_of(st, child.name());
    return p && p->at("state").as_string() == "ended" && num(p->at("stats").at("done")) == 4;
  });
  EXPECT_EQ(num(ended.at("totals").at("running")), 0u);
  EXPECT_EQ(num(ended.at("totals").at("done")), 4u);
}

// A nested master killed before its last word: its process's end ends its pool on the page, and
// what it held is no longer counted as running.
TEST(dashboard, a_killed_childs_pool_is_shown_ended) {
  fiber::context ctx(with_dashboard());
  auto u = parse(ctx.dashboard_url());
  fiber::simple_queue<int> gate(ctx), die(ctx);
  fiber::process child(ctx, &pool_then_killed, gate, die);
  child.start().get();
  (void)when_its_pool_holds_four(u, child.name());
  die.put(0).get();
  child.join().get();
  EXPECT_EQ(child.exitcode(), -SIGKILL);
  auto ended = state_when(u, [&](const boost::json::object& st) {
    auto* p = pool_of(st, child.name());
    return p && p->at("state").as_string() == "ended";
  });
  EXPECT_EQ(num(ended.at("totals").at("running")), 0u);
  EXPECT_EQ(num(ended.at("totals").at("queued")), 0u);
}

