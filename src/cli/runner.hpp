// What the `fiber` command does on an engine: one runner per backend answers the same verbs, and
// `fiber run` takes the same steps with the same words on every engine (runner::run); an engine
// writes its launch's steps only.
#pragma once
#include <boost/json/object.hpp>
#include <memory>
#include <optional>
#include <string>

#include "cli/dashboard_relay.hpp"
#include "cli/run_options.hpp"

namespace fiber::cli {

/// One `fiber run` on an engine, planned: its flags checked and its request made, nothing created.
class launch {
 public:
  explicit launch(std::string name) : name_(std::move(name)) {}
  virtual ~launch() = default;
  const std::string& name() const noexcept { return name_; }

  /// --dry-run: what would be built and created, as JSON.
  virtual boost::json::object plan() const = 0;
  /// Builds and pushes the image, and checks that what the run needs exists on the engine (a
  /// free name, claims, an account): fiber::error naming what is missing and the fix.
  virtual void prepare() = 0;
  /// Creates the run on the engine; what the "fiber: ..." line says of it (its ids, its image).
  virtual std::string create() = 0;
  /// Attached: follows the run to its end, its output as it comes; its exit status. Not attached:
  /// returns once the engine has taken it (0). nullopt: the user detached (Ctrl-C).
  virtual std::optional<int> follow(bool attach) = 0;

 private:
  std::string name_;
};

class runner {
 public:
  virtual ~runner() = default;
  /// `fiber run`: plan, --dry-run, prepare, create, follow. Exit status: with --attach the
  /// master's own, 130 when the user detached, else 0 once it started.
  int run(const run_options& given);
  /// This user's runs: name, state, status, age, running workers.
  virtual int ps() = 0;
  virtual int logs(const logs_options& o) = 0;
  /// Returns once the run's master and workers are gone.
  virtual int stop(const std::string& name) = 0;
  /// Removes ended runs and what masters that are gone left.
  virtual int gc() = 0;
  /// Copies between a claim and this machine: one side is CLAIM:PATH (parse_claim_path).
  virtual int cp(const copy_options& o) = 0;
  /// `fiber dashboard`: the page of a run started with --dashboard, served here
  /// (cli/dashboard_relay) until Ctrl-C.
  int dashboard(const dashboard_options& o);

 protected:
  /// The master's output so far (stdout and stderr), where its page's address is.
  virtual std::string master_output(const std::string& name) = 0;
  /// How a request from here reaches port `port` of run `name`'s master.
  virtual dashboard_route route_to_master(const std::string& name, int port) = 0;
  /// The token of run `name`'s page where its master did not print it (kept in the run's
  /// Secret on Kubernetes); empty where the engine keeps none.
  virtual std::string dashboard_token(const std::string&) { return {}; }
  /// The run `o` asks for (a program and well-formed --env pairs, checked already).
  virtual std::unique_ptr<launch> plan_run(const run_options& o) = 0;
  /// How the hints name this engine's command.
  virtual std::string command_words() const { return "fiber"; }
};

}  // namespace fiber::cli
