// The `fiber` command: build, push and run a fiber program's master on an engine, and watch it.
// `fiber --help` and each subcommand's --help are the reference; docs/cli.md walks through it.
// Exit status: `run --attach` exits with the master's own code; 125 when fiber itself fails (an
// engine, a registry, a bad flag), as `docker run` does; 130 after Ctrl-C detached.
#include <CLI/CLI.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "cli/docker_runner.hpp"
#include "fiber/error.hpp"
#include "cli/kubernetes_runner.hpp"
#include "cli/local_runner.hpp"
#include "cli/run_options.hpp"
#include "cli/slurm_runner.hpp"
#include "fiber/history.hpp"

namespace fiber::cli {

namespace {

[[noreturn]] void not_here(const std::string& verb) {
  throw error(errc::config_error, "`fiber " + verb +
                                      "` runs on an engine, and --backend local runs the program here: use --backend "
                                      "docker, kubernetes or slurm");
}

/// `fiber history`: the runs the flight recorder kept here, newest first.
int print_history() {
  auto runs = run_history();
  if (runs.empty()) {
    std::printf("no recorded runs in %s\n", config::load().record_dir.empty() ? "the record folder (record_dir)"
                                                                              : config::load().record_dir.c_str());
    return 0;
  }
  std::printf("%-12s  %-19s  %9s  %-20s  %5s  %5s  %17s  %5s  %9s  %s\n", "RUN", "STARTED (UTC)", "SECONDS", "PROGRAM",
              "POOLS", "MAPS", "TASKS DONE/SENT", "LOST", "WORKERS", "END");
  for (auto& r : runs) {
    auto t = std::chrono::system_clock::to_time_t(r.began);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    std::string tasks = std::to_string(r.tasks_done) + "/" + std::to_string(r.tasks_sent);
    std::string workers = std::to_string(r.workers_started) + (r.workers_lost ? " (" + std::to_string(r.workers_lost) + " lost)" : "");
    std::string end = r.ended ? "ended" : "no end recorded (killed, or running)";
    if (r.truncated) end += ", truncated";
    if (r.tasks_timed_out) end += ", " + std::to_string(r.tasks_timed_out) + " timed out";
    if (r.workers_memory_exceeded) end += ", " + std::to_string(r.workers_memory_exceeded) + " past their memory limit";
    std::printf("%-12s  %-19s  %9.2f  %-20.20s  %5llu  %5llu  %17s  %5llu  %9s  %s\n", r.id.c_str(), when, r.seconds,
                r.program.c_str(), static_cast<unsigned long long>(r.pools), static_cast<unsigned long long>(r.maps),
                tasks.c_str(), static_cast<unsigned long long>(r.tasks_lost), workers.c_str(), end.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace fiber::cli

namespace fiber::cli {
namespace {
/// What the command line says: the backend, the subcommand given and its options.
struct command_line {
  std::string backend;
  run_options ro;
  std::string memory;
  logs_options lo;
  std::string stop_name, trace_run, trace_out, trace_format = "json", history_html, history_out;
  dashboard_options dao;
  copy_options co;
  CLI::App *run = nullptr, *ps = nullptr, *logs = nullptr, *stop = nullptr, *history = nullptr, *trace = nullptr,
           *dash = nullptr, *cp = nullptr;
};

void add_run_command(CLI::App& app, command_line& c) {
  c.run = app.add_subcommand("run", "run a program's master (and through it, its workers) on the backend");
  c.run->add_flag("-a,--attach", c.ro.attach, "stream the master's output and exit with its exit code (Ctrl-C detaches)");
  c.run->add_flag("--build", c.ro.build,
                "build the image: from the Dockerfile in --context, else a minimal image of the program and its "
                "libraries");
  c.run->add_option("--image", c.ro.image, "run this image (built nothing)");
  c.run->add_option("--registry", c.ro.registry, "push the built image to HOST[:PORT][/PATH] and run it by digest")
      ->envname("FIBER_REGISTRY");
  c.run->add_option("--context", c.ro.context, "the folder to build (default: here)")->capture_default_str();
  c.run->add_option("--dockerfile", c.ro.dockerfile, "the Dockerfile in --context")->capture_default_str();
  c.run->add_option("--build-arg", c.ro.build_args, "KEY=VALUE for an ARG of the Dockerfile (e.g. TARGET=my_program for "
                                                 "containers/Dockerfile)")
      ->allow_extra_args(false);
  c.run->add_option("--name", c.ro.name, "the run's name (default: the program's name and 6 hex digits)");
  c.run->add_option("--cpu", c.ro.cpu, "CPUs for the master")->check(CLI::NonNegativeNumber);
  c.run->add_option("--memory", c.memory, "memory for the master: 512M, 2G");
  c.run->add_option("--gpu", c.ro.gpu, "GPUs for the master")->check(CLI::NonNegativeNumber);
  c.run->add_option("-v,--volume", c.ro.volumes, "CLAIM[:PATH][:ro]: a volume at PATH (default /persistent), for the "
                                              "master and its workers")
      ->allow_extra_args(false);
  c.run->add_option("--env", c.ro.env, "KEY=VALUE in the master's environment (its workers inherit fiber's config)")
      ->allow_extra_args(false);
  c.run->add_flag("--dashboard", c.ro.dashboard,
                "the master serves a live page of its run: `fiber dashboard NAME` opens it here (local: it prints "
                "its address itself)");
  c.run->add_flag("--durable", c.ro.durable,
                "the master journals its pools' results under a run id it prints: run again with that id after "
                "the master died, the program takes up where it stopped (FIBER_DURABLE, FIBER_RUN_ID)");
  c.run->add_option("--restarts", c.ro.restarts,
                    "with --durable: a master that dies is started again with the same run id, up to N times (on "
                    "this host when it died by a signal other than SIGINT or SIGTERM; Docker: the container's "
                    "restart policy, on any failure; Kubernetes: the Job's backoffLimit)")
      ->check(CLI::NonNegativeNumber);
  c.run->add_flag("--dry-run", c.ro.dry_run, "print what would be built and created, as JSON, and stop");
  c.run->add_option("command", c.ro.command, "the program and its arguments, after --")->required();
}

void add_other_commands(CLI::App& app, command_line& c) {
  c.ps = app.add_subcommand("ps", "this user's runs: name, state, status, age, running workers");
  c.logs = app.add_subcommand("logs", "a run's output (its master's, or a worker's with --process)");
  c.logs->add_flag("-f,--follow", c.lo.follow, "keep following until it ends");
  c.logs->add_option("--process", c.lo.process, "a worker by its process name (its fiber.process label, e.g. PoolWorker-1-3)");
  c.logs->add_option("name", c.lo.name, "the run's name")->required();
  c.stop = app.add_subcommand("stop", "stop a run: its master (SIGTERM, then SIGKILL after 10 s) and its workers");
  c.stop->add_option("name", c.stop_name, "the run's name")->required();
  app.add_subcommand("gc", "remove ended runs and the workers of masters that are gone");
  c.history = app.add_subcommand("history", "the runs this machine's flight recorder kept (record_dir), newest first");
  c.history->add_option("--html", c.history_html,
                        "draw this run (an id, the start of one, \"last\", or a recording's path) as a page: tasks "
                        "per second and workers over time, failures marked");
  c.history->add_option("-o,--output", c.history_out, "the page for --html (default: <run>.html here)");
  c.trace = app.add_subcommand("trace", "write a recorded run as a trace for Perfetto (ui.perfetto.dev) or chrome://tracing");
  c.trace->add_option("run", c.trace_run, "its id, the start of it, \"last\", or a recording's path (fiber history lists them)")
      ->required();
  c.trace->add_option("-o,--output", c.trace_out,
                      "the trace file (default: <run>.trace.json here, <run>.perfetto-trace for --format perfetto)");
  c.trace->add_option("--format", c.trace_format,
                      "json: Chrome's JSON (Perfetto, chrome://tracing, speedscope); perfetto: Perfetto's own "
                      "protobuf, a fraction of the size")
      ->check(CLI::IsMember({"json", "perfetto"}));
  c.dash = app.add_subcommand("dashboard", "serve the live page of a run started with --dashboard on 127.0.0.1, "
                                               "relayed to its master, until Ctrl-C");
  c.dash->add_option("name", c.dao.name, "the run's name")->required();
  c.dash->add_option("--port", c.dao.port, "the port on 127.0.0.1 (default: a free one)")->check(CLI::Range(0, 65535));
  c.cp = app.add_subcommand("cp", "copy between a claim and this machine: fiber cp ./data results:/in, "
                                      "fiber cp results:/out ./out (no tools needed in any image)");
  c.cp->add_option("src", c.co.src, "a local file or folder, or CLAIM:PATH")->required();
  c.cp->add_option("dst", c.co.dst, "CLAIM:PATH, or a local path (ending in / or an existing folder: into it)")->required();
  c.cp->add_option("--image", c.co.image, "Kubernetes: the image of the helper pod that serves the claim (default: your "
                                      "newest run's)");
  c.cp->add_option("--program", c.co.program, "Kubernetes: a fiber program in that image (its path); started with "
                                          "FIBER_CLAIM_COPY_PORT, its fiber::init serves the copy (default: your "
                                          "newest run's program)");
}

/// `fiber trace`: a recorded run as a trace file, and a line saying what it holds.
int write_trace_file(const std::string& run, const std::string& given_out, const std::string& format) {
  bool perfetto = format == "perfetto";
  auto out = given_out.empty() ? (run == "last" || run.find('/') != std::string::npos ? std::string("run") : run) +
                                     (perfetto ? ".perfetto-trace" : ".trace.json")
                               : given_out;
  auto r = fiber::write_trace(run, out, perfetto ? fiber::trace_format::perfetto : fiber::trace_format::chrome_json);
  std::printf("%s: run %s (%s), %llu tasks on %llu workers, %.2f s; open it in ui.perfetto.dev\n", out.c_str(),
              r.id.c_str(), r.program.c_str(), static_cast<unsigned long long>(r.tasks_sent),
              static_cast<unsigned long long>(r.workers_started), r.seconds);
  return 0;
}

/// `fiber history --html`: a recorded run as a page, and a line saying where.
int write_history_file(const std::string& run, const std::string& given_out) {
  auto out = given_out.empty() ? (run == "last" || run.find('/') != std::string::npos ? std::string("run") : run) + ".html"
                               : given_out;
  auto r = fiber::write_history_page(run, out);
  std::printf("%s: run %s (%s), %llu tasks, %.2f s; open it in a browser\n", out.c_str(), r.id.c_str(), r.program.c_str(),
              static_cast<unsigned long long>(r.tasks_done), r.seconds);
  return 0;
}

/// Runs the subcommand given, on the backend given.
int dispatch(command_line& c, const std::string& verb) {
  if (!c.memory.empty()) c.ro.memory_bytes = parse_size(c.memory, "--memory");
  // The recorder's runs are on this machine, whatever the backend.
  if (*c.history && !c.history_html.empty()) return write_history_file(c.history_html, c.history_out);
  if (*c.history) {
    if (!c.history_out.empty()) throw fiber::error(fiber::errc::config_error, "-o names the page of --html RUN: give the run");
    return print_history();
  }
  if (*c.trace) return write_trace_file(c.trace_run, c.trace_out, c.trace_format);
  if (*c.run) apply_durable(c.ro, c.backend);
  if (c.backend == "local") {
    if (*c.run) return run_locally(c.ro);
    if (*c.dash)
      throw fiber::error(fiber::errc::config_error, "a local run's master serves its page on this host itself, and prints its "
                                      "address (\"fiber: dashboard of run ... at http://127.0.0.1:...\")");
    not_here(verb);
  }
  std::unique_ptr<runner> r;
  if (c.backend == "slurm") r = std::make_unique<slurm_runner>();
  else if (c.backend == "kubernetes") r = std::make_unique<kubernetes_runner>();
  else r = std::make_unique<docker_runner>();
  if (*c.run) return r->run(c.ro);
  if (*c.ps) return r->ps();
  if (*c.logs) return r->logs(c.lo);
  if (*c.stop) return r->stop(c.stop_name);
  if (*c.cp) return r->cp(c.co);
  if (*c.dash) return r->dashboard(c.dao);
  return r->gc();
}
}  // namespace
}  // namespace fiber::cli

namespace fiber::cli {
namespace {
int run_command_line(int argc, char** argv) {
  command_line c;
  CLI::App app{"fiber: build, push and run a fiber program's master on Docker, Kubernetes or Slurm (or here), and watch "
               "it.\n"
               "Exit status: the master's own with run --attach; 125 when fiber itself fails."};
  app.require_subcommand(1);
  app.fallthrough();  // `fiber run --backend docker ...` as well as `fiber --backend docker run ...`
  const char* env_backend = std::getenv("FIBER_BACKEND");
  c.backend = env_backend && *env_backend ? env_backend : "docker";
  app.add_option("--backend", c.backend, "where the master runs (default: FIBER_BACKEND, else docker)")
      ->check(CLI::IsMember({"docker", "kubernetes", "slurm", "local"}))
      ->capture_default_str();

  add_run_command(app, c);
  add_other_commands(app, c);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return dispatch(c, app.get_subcommands().front()->get_name());
  } catch (const fiber::error& e) {
    // The reason alone: the error code's words (": could not start a child") add nothing here.
    std::fflush(stdout);
    std::fprintf(stderr, "fiber: %s\n", e.reason().c_str());
    return 125;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "fiber: %s\n", e.what());
    return 125;
  }
  return 0;
}
}  // namespace
}  // namespace fiber::cli

int main(int argc, char** argv) {
  try {
    return fiber::cli::run_command_line(argc, argv);
  } catch (const std::exception& e) {  // the command line's own setup, or reporting an error
    std::fprintf(stderr, "fiber: %s\n", e.what());
    return 125;
  } catch (...) {
    std::fputs("fiber: an exception that is not a std::exception ended the command\n", stderr);
    return 125;
  }
}
