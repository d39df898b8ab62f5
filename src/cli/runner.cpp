#include "cli/runner.hpp"

#include <boost/json/serialize.hpp>
#include <cstdio>

#include "fiber/error.hpp"

namespace fiber::cli {

int runner::run(const run_options& given) {
  auto o = given;
  // In a container, a pod or a Slurm job, the page listens on the master's own addresses (its
  // token guards it); `fiber dashboard NAME` reaches it through the engine.
  if (o.dashboard) o.env.insert(o.env.begin(), {"FIBER_DASHBOARD=true", "FIBER_DASHBOARD_ADDRESS=0.0.0.0"});
  if (o.command.empty())
    throw error(errc::config_error, "nothing to run: give the program after --, e.g. `fiber run --build -- ./pi_estimation`");
  for (auto& kv : o.env)
    if (kv.find('=') == std::string::npos || kv.front() == '=') throw error(errc::config_error, "--env " + kv + " is not KEY=VALUE");
  auto l = plan_run(o);
  if (o.dry_run) {
    std::printf("%s\n", boost::json::serialize(l->plan()).c_str());
    return 0;
  }
  l->prepare();
  std::fprintf(stderr, "fiber: %s\n", l->create().c_str());
  auto code = l->follow(o.attach);
  auto name = l->name().c_str();
  auto words = command_words();
  auto cmd = words.c_str();
  if (!code) {
    std::fprintf(stderr, "\nfiber: detached; %s keeps running: `%s logs -f %s` follows it again, `%s stop %s` stops it\n",
                 name, cmd, name, cmd, name);
    return 130;
  }
  if (!o.attach) {
    std::printf("%s\n", name);
    std::fprintf(stderr, "fiber: `%s logs -f %s` follows it, `%s stop %s` stops it\n", cmd, name, cmd, name);
    return 0;
  }
  return *code;
}

int runner::dashboard(const dashboard_options& o) {
  auto at = dashboard_in_output(master_output(o.name));
  if (!at)
    throw error(errc::config_error, "run " + o.name + "'s master has printed no dashboard address: start the run with "
                                    "`fiber run --dashboard` (its master prints the address once its context starts; "
                                    "`fiber logs " + o.name + "` shows what it printed)");
  if (at->token.empty()) at->token = dashboard_token(o.name);
  if (at->token.empty())
    throw error(errc::config_error, "run " + o.name + "'s master printed its page's address without its token, and "
                                    "none is kept for it here");
  return relay_dashboard(o.name, *at, route_to_master(o.name, at->port), o.port);
}

}  // namespace fiber::cli
