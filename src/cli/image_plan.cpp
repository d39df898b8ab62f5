#include "cli/image_plan.hpp"

#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "backend/docker/blocking_engine.hpp"
#include "cli/registry_auth.hpp"
#include "cli/run_names.hpp"
#include "fiber/error.hpp"

namespace fiber::cli {
namespace fs = std::filesystem;
using detail::docker_engine;

image_plan plan_image(const run_options& o) {
  if (o.command.empty())
    throw error(errc::config_error, "nothing to run: give the program after --, e.g. `fiber run --build -- ./pi_estimation`");
  if (!o.image.empty() && o.build)
    throw error(errc::config_error, "--image and --build exclude each other: run an existing image, or build one");
  image_plan p;
  p.command = o.command;
  p.ref = o.image;
  for (auto& kv : o.build_args) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw error(errc::config_error, "--build-arg " + kv + " is not KEY=VALUE");
    p.build_args.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  if (!p.build_args.empty() && !p.ref.empty())
    throw error(errc::config_error, "--build-arg with --image: nothing is built; drop one of them");
  if (!p.ref.empty()) return p;
  auto dir = fs::path(o.context);
  bool has_dockerfile = fs::is_regular_file(dir / o.dockerfile);
  if (!has_dockerfile && !o.build)
    throw error(errc::config_error, "no image to run: pass --image IMAGE, or --build to build one (from " +
                                        (dir / o.dockerfile).string() +
                                        " when it exists, else a minimal image of the program itself)");
  if (has_dockerfile) {
    p.context = context_of_folder(dir, o.dockerfile);
  } else {
    if (!p.build_args.empty())
      throw error(errc::config_error, "--build-arg needs a Dockerfile (" + (dir / o.dockerfile).string() +
                                          " does not exist): the generated image of the program has no ARGs");
    // A name without '/' is looked up on PATH, as a shell would (`-- bash -c ...`).
    auto program = program_path(p.command[0]);
    p.context = context_of_program(program);
    p.generated = true;
    p.command[0] = fs::canonical(program).string();  // where the generated image holds it
  }
  auto app = sanitized_name(fs::path(o.command[0]).filename().string());
  p.repo = (o.registry.empty() ? "fiber/" : o.registry + "/") + app;
  // The same context built with other arguments is another image: another tag.
  auto digest = p.context->digest;
  if (!p.build_args.empty()) {
    std::string all = digest;
    for (auto& [k, v] : p.build_args) all += "\n" + k + "=" + v;
    digest = sha256_hex(all);
  }
  p.tag = digest.substr(0, 12);
  p.ref = p.repo + ":" + p.tag;
  return p;
}

boost::json::object describe_build(const image_plan& p, const run_options& o) {
  if (!p.context) return {};
  return {{"context", p.generated ? "generated: the program and its libraries" : fs::absolute(o.context).lexically_normal().string()},
          {"files", p.context->files},
          {"context_sha256", p.context->digest},
          {"tag", p.ref},
          {"build_args", [&] {
             boost::json::object a;
             for (auto& [k, v] : p.build_args) a[k] = v;
             return a;
           }()},
          {"push", o.registry.empty() ? boost::json::value(nullptr) : boost::json::value(p.repo + ":" + p.tag)}};
}

void build_and_push(image_plan& p, const run_options& o, detail::blocking_engine& engine, bool must_be_local) {
  auto echo = [](std::string_view out) { std::fwrite(out.data(), 1, out.size(), stderr); };
  if (!p.context) {
    if (must_be_local &&
        !engine.run<bool>([&](docker_engine& e, auto done) { e.images().has(p.ref, std::move(done)); }))
      throw error(errc::config_error, "image '" + p.ref + "' is not on the Docker engine at " + engine.engine().host() +
                                          ": pull or build it there, or use --build");
    return;
  }
  std::fprintf(stderr, "fiber: building %s (%zu files in the context)\n", p.ref.c_str(), p.context->files);
  engine.run<std::string>([&](docker_engine& e, auto done) {
    e.images().build(std::move(p.context->tar), p.ref, p.context->dockerfile, echo, std::move(done), p.build_args);
  });
  if (o.registry.empty()) return;
  auto registry = o.registry.substr(0, o.registry.find('/'));
  auto credentials = credentials_for(registry);
  auto auth = registry_auth_header(credentials, registry);
  std::fprintf(stderr, "fiber: pushing %s\n", p.ref.c_str());
  std::string digest;
  try {
    digest = engine.run<std::string>([&](docker_engine& e, auto done) { e.images().push(p.repo, p.tag, auth, echo, std::move(done)); });
  } catch (const error& e) {
    // The registry's words, and what to do about them.
    std::string said = e.reason();
    if (credentials.username.empty() && (said.find("no basic auth credentials") != std::string::npos ||
                                         said.find("authentication required") != std::string::npos))
      throw error(errc::config_error, said + "; registry " + registry + " wants credentials and " +
                                          (std::getenv("DOCKER_CONFIG") ? std::string("$DOCKER_CONFIG") : std::string("~/.docker")) +
                                          "/config.json has none for it: `docker login " + registry + "` stores them");
    if (!credentials.username.empty() && (said.find("unauthorized") != std::string::npos ||
                                          said.find("denied") != std::string::npos))
      throw error(errc::config_error, said + "; registry " + registry + " refused the credentials of user " +
                                          credentials.username + " from " + credentials.source +
                                          ": `docker login " + registry + "` again (or check that the user may push to " +
                                          p.repo + ")");
    throw;
  }
  p.ref = p.repo + "@" + digest;  // the exact image, for the master and every worker
}

}  // namespace fiber::cli
