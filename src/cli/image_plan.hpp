// The image a run's master and its workers use: the one given (--image), or one built here through
// the Docker engine (from the Dockerfile in --context, else a minimal image of the program itself),
// tagged by a digest of its context, pushed to --registry and then run by digest. The docker and
// kubernetes runners share it.
#pragma once
#include <boost/json/object.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/build_context.hpp"
#include "cli/run_options.hpp"

namespace fiber::detail {
class blocking_engine;
}

namespace fiber::cli {

struct image_plan {
  std::string ref;                        // what runs: --image, repo:tag, then repo@digest once pushed
  std::string repo, tag;                  // of a build
  std::optional<build_context> context;   // set: there is something to build
  bool generated = false;                 // the program's own minimal image (no Dockerfile)
  std::vector<std::string> command;       // the run's command; a generated image's program by its full path
  std::vector<std::pair<std::string, std::string>> build_args;  // --build-arg, in the tag's digest too
};

/// Decides, without contacting anything: fiber::error(config_error) for nothing to run, --image
/// with --build, or no image and nothing to build.
image_plan plan_image(const run_options& o);

/// What --dry-run prints of the build: the context, its digest, the tag and where it goes.
boost::json::object describe_build(const image_plan& p, const run_options& o);

/// Builds the planned image (its output to stderr) and pushes it to --registry with the
/// credentials in ~/.docker/config.json; `p.ref` becomes repo@digest. Nothing to build: checks
/// that the engine has `p.ref` when `must_be_local` (a cluster pulls it itself).
void build_and_push(image_plan& p, const run_options& o, detail::blocking_engine& engine, bool must_be_local);

}  // namespace fiber::cli
