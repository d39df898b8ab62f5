// What `fiber run --durable` adds to the master's environment, on each engine, and the flags it
// refuses (cli/run_options.hpp's apply_durable).
#include "cli/run_options.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "fiber/error.hpp"

namespace {
using fiber::cli::apply_durable;
using fiber::cli::run_options;

bool has(const run_options& o, const std::string& kv) { return std::find(o.env.begin(), o.env.end(), kv) != o.env.end(); }
std::string value_of(const run_options& o, const std::string& key) {
  for (auto& kv : o.env)
    if (kv.starts_with(key + "=")) return kv.substr(key.size() + 1);
  return {};
}
std::string error_of(run_options o, const std::string& backend) {
  try {
    apply_durable(o, backend);
  } catch (const fiber::error& e) {
    EXPECT_EQ(e.code(), fiber::errc::config_error);
    return e.what();
  }
  return {};
}

TEST(run_options, durable_turns_the_journal_on_under_a_run_id_made_here_unless_one_is_given) {
  ::unsetenv("FIBER_RUN_ID");
  ::unsetenv("FIBER_JOURNAL_DIR");
  run_options o;
  o.durable = true;
  apply_durable(o, "local");
  EXPECT_TRUE(has(o, "FIBER_DURABLE=true"));
  EXPECT_FALSE(value_of(o, "FIBER_RUN_ID").empty());
  run_options named;
  named.durable = true;
  named.env = {"FIBER_RUN_ID=es-7"};
  apply_durable(named, "slurm");
  EXPECT_EQ(value_of(named, "FIBER_RUN_ID"), "es-7");
  EXPECT_EQ(std::count_if(named.env.begin(), named.env.end(), [](auto& kv) { return kv.starts_with("FIBER_RUN_ID="); }), 1);
  EXPECT_TRUE(value_of(named, "FIBER_JOURNAL_DIR").empty()) << "Slurm's nodes share the home folder";
  run_options plain;
  apply_durable(plain, "docker");
  EXPECT_TRUE(plain.env.empty()) << "nothing without --durable";
}

TEST(run_options, a_run_id_or_journal_dir_in_this_shell_goes_to_the_master_too) {
  ::setenv("FIBER_RUN_ID", "from-the-shell", 1);
  ::setenv("FIBER_JOURNAL_DIR", "/claims/j", 1);
  run_options o;
  o.durable = true;
  apply_durable(o, "kubernetes");  // a pod does not see this shell's environment
  ::unsetenv("FIBER_RUN_ID");
  ::unsetenv("FIBER_JOURNAL_DIR");
  EXPECT_EQ(value_of(o, "FIBER_RUN_ID"), "from-the-shell");
  EXPECT_EQ(value_of(o, "FIBER_JOURNAL_DIR"), "/claims/j");
}

TEST(run_options, a_durable_container_keeps_its_journal_on_its_first_writable_volume) {
  ::unsetenv("FIBER_JOURNAL_DIR");
  run_options o;
  o.durable = true;
  o.volumes = {"data:/data:ro", "results"};
  apply_durable(o, "kubernetes");
  EXPECT_EQ(value_of(o, "FIBER_JOURNAL_DIR"), "/persistent/.fiber/journals");
  run_options chosen;
  chosen.durable = true;
  chosen.env = {"FIBER_JOURNAL_DIR=/mnt/j"};
  apply_durable(chosen, "docker");
  EXPECT_EQ(value_of(chosen, "FIBER_JOURNAL_DIR"), "/mnt/j");
  run_options none;
  none.durable = true;
  auto why = error_of(none, "docker");
  EXPECT_NE(why.find("the journal must outlive the master's container: give a volume"), std::string::npos) << why;
}

TEST(run_options, restarts_need_durable_and_an_engine_that_starts_the_master_again) {
  run_options o;
  o.restarts = 2;
  EXPECT_NE(error_of(o, "local").find("add --durable"), std::string::npos);
  o.durable = true;
  EXPECT_NE(error_of(o, "slurm").find("Slurm runs it again when it requeues it"), std::string::npos);
  EXPECT_EQ(error_of(o, "local"), "");
  o.volumes = {"results"};
  EXPECT_EQ(error_of(o, "kubernetes"), "");
  EXPECT_EQ(error_of(o, "docker"), "");
}

}  // namespace
