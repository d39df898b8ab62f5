// hub_workers=fork (runtime/hubs/hub_forks, runtime/hubs/hub_spawner): the master places children on the
// host hubs linked to it, up to each host's CPUs but one; the hub forks them (real processes, here
// /bin/sleep and /bin/sh) and tells the master their pid and their end; a child with no room
// waits and is placed when one ends; one signalled while it waits ends without running; when a
// hub goes, its children end with it.
#include <gtest/gtest.h>

#include <csignal>
#include <cerrno>

#include "fiber/config.hpp"
#include "fiber/error.hpp"
#include "hub_harness.hpp"
#include "runtime/hubs/hub_forks.hpp"

using namespace fiber::detail;
using namespace std::chrono_literals;
using namespace hub_harness;

namespace {

/// A master whose children are forked by its hubs, on one host "h1" of `cpus` CPUs.
struct forking_master : master {
  fiber::config cfg;
  std::unique_ptr<backend> engine = make_local_backend(io, cfg);  // what a master starts hubs with
  std::shared_ptr<hub_forks> forks;

  explicit forking_master(int cpus) {
    forks = std::make_shared<hub_forks>(io, *engine, listener, std::vector<hub_host>{{"h1", cpus}});
    listener->watch_hubs({.linked = [this](const std::string& id) { forks->linked("h1", id); },
                          .unlinked = [this](const std::string& id) { forks->unlinked(id); },
                          .news = [this](const std::string& id, const std::string& start, multipart&& m) {
                            forks->news(id, start, std::move(m));
                          }});
  }
};

spawn_spec command(std::string exe, std::vector<std::string> args) {
  spawn_spec s;
  s.name = "child";
  s.executable = std::move(exe);
  s.args = std::move(args);
  return s;
}

/// A started child and how it ended (nullopt while it runs).
struct watched {
  std::unique_ptr<job> j;
  std::shared_ptr<std::optional<int>> code = std::make_shared<std::optional<int>>();
  explicit watched(std::unique_ptr<job> started) : j(std::move(started)) {
    j->on_exit([c = code](int exit) { *c = exit; });
  }
};

bool alive(int pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

}  // namespace

TEST(hub_forks, children_fill_the_hosts_cpus_but_one_and_the_next_waits_until_one_ends) {
  forking_master m(3);  // two CPUs for children
  std::vector<watched> kids;
  for (int i = 0; i < 3; ++i) kids.emplace_back(m.forks->spawn(command("/bin/sleep", {"60"})));
  m.io.poll();
  EXPECT_NE(kids[2].j->pending_reason().find("waiting for the host hubs to start"), std::string::npos);
  hub h(m, "hub-1", 60s, /*forks=*/true);
  ASSERT_TRUE(m.run_until([&] { return kids[0].j->pid() > 0 && kids[1].j->pid() > 0; }));
  EXPECT_TRUE(alive(kids[0].j->pid()));
  EXPECT_TRUE(alive(kids[1].j->pid()));
  EXPECT_EQ(kids[2].j->pid(), 0);
  EXPECT_NE(kids[2].j->pending_reason().find("CPUs are taken"), std::string::npos);
  EXPECT_EQ(kids[0].j->placement(), "host h1, forked by its hub");
  // One ends: the hub reaps it and says so; the third is forked in its place.
  int first = kids[0].j->pid();
  kids[0].j->signal(SIGKILL);
  ASSERT_TRUE(m.run_until([&] { return kids[0].code->has_value() && kids[2].j->pid() > 0; }));
  EXPECT_EQ(**kids[0].code, -SIGKILL);
  EXPECT_FALSE(alive(first));
  EXPECT_TRUE(kids[2].j->pending_reason().empty());
  // A fourth waits; asked to end, it ends without having run.
  watched fourth(m.forks->spawn(command("/bin/sleep", {"60"})));
  fourth.j->signal(SIGTERM);
  ASSERT_TRUE(m.run_until([&] { return fourth.code->has_value(); }));
  EXPECT_EQ(**fourth.code, -SIGTERM);
  EXPECT_EQ(fourth.j->pid(), 0);
  EXPECT_NE(fourth.j->exit_detail().find("still waiting"), std::string::npos);
}

TEST(hub_forks, a_childs_exit_code_and_a_start_that_fails_come_back_from_the_hub) {
  forking_master m(4);
  hub h(m, "hub-1", 60s, /*forks=*/true);
  watched three(m.forks->spawn(command("/bin/sh", {"-c", "exit 3"})));
  watched none(m.forks->spawn(command("/nonexistent/program", {})));
  ASSERT_TRUE(m.run_until([&] { return three.code->has_value() && none.code->has_value(); }));
  EXPECT_EQ(**three.code, 3);
  EXPECT_GT(three.j->pid(), 0);
  EXPECT_EQ(**none.code, 127);
  EXPECT_NE(none.j->exit_detail().find("cannot start '/nonexistent/program'"), std::string::npos) << none.j->exit_detail();
}

TEST(hub_forks, when_a_hub_goes_the_children_it_forked_go_with_it) {
  forking_master m(3);
  std::vector<watched> kids;
  for (int i = 0; i < 2; ++i) kids.emplace_back(m.forks->spawn(command("/bin/sleep", {"60"})));
  std::vector<int> pids;
  {
    hub h(m, "hub-1", 60s, /*forks=*/true);
    ASSERT_TRUE(m.run_until([&] { return kids[0].j->pid() > 0 && kids[1].j->pid() > 0; }));
    pids = {kids[0].j->pid(), kids[1].j->pid()};
  }  // the hub ends
  ASSERT_TRUE(m.run_until([&] { return kids[0].code->has_value() && kids[1].code->has_value(); }));
  for (auto& k : kids) {
    EXPECT_EQ(**k.code, -SIGKILL);
    EXPECT_NE(k.j->exit_detail().find("its host hub on h1 ended"), std::string::npos);
  }
  for (int pid : pids) EXPECT_FALSE(alive(pid));
}

TEST(hub_forks, a_hub_that_forks_nothing_refuses_and_a_child_no_host_can_hold_fails_naming_the_fix) {
  forking_master m(3);
  hub h(m);  // hub_workers=engine: it starts no children
  watched refused(m.forks->spawn(command("/bin/sleep", {"60"})));
  ASSERT_TRUE(m.run_until([&] { return refused.code->has_value(); }));
  EXPECT_EQ(**refused.code, 127);
  EXPECT_NE(refused.j->exit_detail().find("starts no children"), std::string::npos);
  auto gpu = command("/bin/true", {});
  gpu.gpu = 1;
  try {
    m.forks->check_capacity(gpu);
    ADD_FAILURE() << "a child asking for a GPU was accepted";
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::unsatisfiable);
    EXPECT_NE(std::string(e.what()).find("set hub_workers=engine"), std::string::npos) << e.what();
  }
  auto big = command("/bin/true", {});
  big.cpu = 3;
  try {
    (void)m.forks->spawn(big);
    ADD_FAILURE() << "a child asking for more CPUs than a hub has was accepted";
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::unsatisfiable);
    EXPECT_NE(std::string(e.what()).find("at most 2"), std::string::npos) << e.what();
  }
}
