// The pool's shared-object courier on its own, without a process: each worker gets an object
// once, what a worker lacks goes before its task, and on other hosts one copy per memory domain:
// its first worker gets the object whole (from the master for the first two domains, then from a
// worker that has it), its mates wait for the copy and are told where it is, a holder that ends
// hands its duty to a mate, and a released object is let go by every worker that held it.
#include "primitives/pool/shared_courier.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include <fiber/shared.hpp>

#include "primitives/pool/wire.hpp"
#include "transport/shared_frames.hpp"

namespace {
using namespace fiber::detail;

/// The pool's side as the courier sees it: workers by routing id, and what was sent to each.
struct test_directory final : courier_directory {
  std::map<std::string, courier_worker> workers;
  std::vector<std::pair<std::string, multipart>> sent;

  void add(const std::string& rid, const std::string& domain) { workers[rid] = {rid, "worker " + rid, domain, true}; }
  std::optional<courier_worker> find(const std::string& rid) const override {
    auto it = workers.find(rid);
    if (it == workers.end()) return std::nullopt;
    return it->second;
  }
  bool has_mates(const courier_worker& w) const override {
    for (auto& [rid, o] : workers)
      if (rid != w.rid && o.domain == w.domain) return true;
    return false;
  }
  std::error_code send(const std::string& rid, multipart&& m) override {
    sent.emplace_back(rid, std::move(m));
    return {};
  }
  /// The kinds of the messages sent to `rid`, in order.
  std::vector<fiber::detail::kind> kinds_to(const std::string& rid) const {
    std::vector<fiber::detail::kind> out;
    for (auto& [to, m] : sent)
      if (to == rid) out.push_back(parse_header(m.front())->type);
    return out;
  }
};

/// How each object in `frames` (attach's, or a `hosted` message's after its header) goes.
std::vector<std::uint8_t> hows(const multipart& frames, std::size_t from = 0) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = from; i < frames.size(); ++i) {
    if (frames[i].size() != sizeof(shared_desc)) continue;
    shared_desc d;
    std::memcpy(&d, frames[i].data(), sizeof d);
    out.push_back(d.how);
  }
  return out;
}

/// A task's arguments holding `theta` (written as the pool writes a chunk).
fiber::writer args_holding(const fiber::shared<std::vector<double>>& theta) {
  fiber::writer w;
  w.send_shared_apart();
  w.value(theta);
  return w;
}

struct shared_courier_test : ::testing::Test {
  test_directory dir;
  std::vector<std::uint64_t> watched;
  shared_courier courier{7, dir, [this](const shared_entry& e) { watched.push_back(e.id()); }};
  fiber::shared<std::vector<double>> theta = fiber::share(std::vector<double>(300000, 0.5));  // 2.4 MB
};
}  // namespace

TEST_F(shared_courier_test, each_worker_gets_an_object_once_and_its_release_is_watched_once) {
  courier.in_host_memory(true);
  dir.add("a", "host");
  dir.add("b", "host");
  auto args = args_holding(theta);
  auto first = courier.attach(*dir.find("a"), args);
  EXPECT_EQ(first.count, 1u);
  EXPECT_EQ(hows(first.frames), std::vector<std::uint8_t>{shared_desc::host_memory}) << "this host's one copy";
  courier.delivered(first);
  EXPECT_EQ(courier.attach(*dir.find("a"), args).count, 0u) << "sent twice to one worker";
  EXPECT_EQ(courier.attach(*dir.find("b"), args).count, 1u);
  EXPECT_EQ(courier.bytes_in_host_memory(), theta.bytes()) << "one copy in host memory, whatever the workers";
  EXPECT_EQ(watched, std::vector<std::uint64_t>{theta.entry()->id()});
  EXPECT_EQ(courier.objects_sent(), 1u) << "only what was delivered counts";
}

TEST_F(shared_courier_test, an_undelivered_object_is_attached_again_next_time) {
  courier.in_host_memory(true);
  dir.add("a", "host");
  auto args = args_holding(theta);
  auto lost = courier.attach(*dir.find("a"), args);
  courier.undelivered(*dir.find("a"), lost);
  EXPECT_EQ(courier.held_by("a"), 0u);
  EXPECT_EQ(courier.attach(*dir.find("a"), args).count, 1u);
}

TEST_F(shared_courier_test, on_other_hosts_one_worker_a_domain_gets_it_whole_and_its_mates_wait_for_its_copy) {
  dir.add("a1", "A");
  dir.add("a2", "A");
  auto args = args_holding(theta);
  auto holder = courier.attach(*dir.find("a1"), args);
  EXPECT_EQ(hows(holder.frames), std::vector<std::uint8_t>{shared_desc::frames});
  EXPECT_GT(holder.bytes, theta.bytes() - 1) << "the object itself, in the frames";
  auto mate = courier.attach(*dir.find("a2"), args);
  EXPECT_EQ(hows(mate.frames), std::vector<std::uint8_t>{shared_desc::later});
  EXPECT_EQ(mate.bytes, 0u);
  // The holder made the domain's copy: the mate is told where it is.
  courier.on_hosted(*dir.find("a1"), hosted_at{.id = theta.entry()->id(), .pid = 42, .fd = 9}, "");
  ASSERT_EQ(dir.kinds_to("a2"), std::vector<fiber::detail::kind>{pool_kind::hosted});
  EXPECT_EQ(hows(dir.sent.back().second, 1), std::vector<std::uint8_t>{shared_desc::host_memory});
  // A later mate maps it at once.
  dir.add("a3", "A");
  EXPECT_EQ(hows(courier.attach(*dir.find("a3"), args).frames), std::vector<std::uint8_t>{shared_desc::host_memory});
}

TEST_F(shared_courier_test, the_master_sends_two_domains_their_copy_and_the_next_fetch_from_a_worker_that_has_it) {
  for (auto d : {"A", "B", "C", "D"}) dir.add(std::string("w") + d, d);
  auto args = args_holding(theta);
  auto id = theta.entry()->id();
  EXPECT_EQ(hows(courier.attach(*dir.find("wA"), args).frames), std::vector<std::uint8_t>{shared_desc::frames});
  EXPECT_EQ(hows(courier.attach(*dir.find("wB"), args).frames), std::vector<std::uint8_t>{shared_desc::frames});
  // Two copies on their way from the master: the third domain waits for a source.
  EXPECT_EQ(hows(courier.attach(*dir.find("wC"), args).frames), std::vector<std::uint8_t>{shared_desc::later});
  // wA has it whole and serves it: wC, waiting, is sent to fetch from it; wD fetches at once.
  courier.on_hosted(*dir.find("wA"), hosted_at{.id = id, .pid = 1, .fd = -1}, "tcp://wA:1\nkeyA");
  ASSERT_EQ(dir.kinds_to("wC"), std::vector<fiber::detail::kind>{pool_kind::hosted});
  EXPECT_EQ(hows(dir.sent.back().second, 1), std::vector<std::uint8_t>{shared_desc::from_peer});
  EXPECT_EQ(hows(courier.attach(*dir.find("wD"), args).frames), std::vector<std::uint8_t>{shared_desc::from_peer});
}

TEST_F(shared_courier_test, a_holder_that_ends_before_its_copy_hands_its_domain_to_a_mate) {
  dir.add("a1", "A");
  dir.add("a2", "A");
  auto args = args_holding(theta);
  (void)courier.attach(*dir.find("a1"), args);
  (void)courier.attach(*dir.find("a2"), args);  // waits for a1's copy
  auto a1 = *dir.find("a1");
  dir.workers.erase("a1");
  courier.on_worker_ended(a1);
  // a2 gets the object whole, as its domain's holder (it will make the copy and report it).
  ASSERT_EQ(dir.kinds_to("a2"), std::vector<fiber::detail::kind>{pool_kind::hosted});
  EXPECT_EQ(hows(dir.sent.back().second, 1), std::vector<std::uint8_t>{shared_desc::frames});
  EXPECT_EQ(courier.held_by("a1"), 0u);
}

TEST_F(shared_courier_test, a_released_object_is_let_go_by_every_worker_that_held_it) {
  courier.in_host_memory(true);
  dir.add("a", "host");
  dir.add("b", "host");
  dir.add("c", "host");
  auto args = args_holding(theta);
  (void)courier.attach(*dir.find("a"), args);
  (void)courier.attach(*dir.find("b"), args);
  courier.released(theta.entry()->id());
  EXPECT_EQ(dir.kinds_to("a"), std::vector<fiber::detail::kind>{pool_kind::release});
  EXPECT_EQ(dir.kinds_to("b"), std::vector<fiber::detail::kind>{pool_kind::release});
  EXPECT_TRUE(dir.kinds_to("c").empty()) << "it never held it";
  EXPECT_EQ(courier.held_by("a"), 0u);
}
