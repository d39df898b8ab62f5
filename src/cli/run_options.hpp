// What the `fiber` command was asked to do, as CLI11 parsed it (src/cli/main.cpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fiber::cli {

struct run_options {
  bool attach = false, build = false, dry_run = false;
  bool dashboard = false;         // --dashboard: the master serves its live page (fiber dashboard NAME)
  bool durable = false;           // --durable: the master journals its pools' results (docs/durable.md)
  int restarts = 0;               // --restarts N: a durable master that died starts again (local, docker, kubernetes)
  std::string image;              // --image: run this one, build nothing
  std::string registry;           // --registry HOST[/PATH]: push there, run by digest
  std::string context = ".";      // --context: the folder holding the Dockerfile
  std::string dockerfile = "Dockerfile";
  std::string name;               // --name; empty: from the program's name
  double cpu = 0;                 // --cpu: the master's CPUs (0: no limit)
  std::int64_t memory_bytes = 0;  // --memory: the master's memory (0: no limit)
  int gpu = 0;                    // --gpu: the master's GPUs
  std::vector<std::string> volumes;  // -v CLAIM[:PATH][:ro]
  std::vector<std::string> env;      // --env K=V
  std::vector<std::string> build_args;  // --build-arg K=V, for the Dockerfile's ARGs
  std::vector<std::string> command;  // after --
};

struct copy_options {
  std::string src, dst;
  std::string image, program;  // Kubernetes: the helper pod's fiber program (default: your newest run's)
};

struct dashboard_options {
  std::string name;
  int port = 0;  // --port: where on 127.0.0.1 (0: a free port)
};

struct logs_options {
  std::string name, process;
  bool follow = false;
};

/// One side of `fiber cp`: "CLAIM:PATH" (PATH inside the claim, "" for all of it).
struct claim_path {
  std::string claim, path;
};
/// CLAIM:PATH when `text` has a ':' after a claim's name (letters, digits, '_', '.', '-'; not
/// starting with '.' or '/'), else nothing: a local path ("./a:b" is local).
std::optional<claim_path> parse_claim_path(const std::string& text);

/// "512M", "2G", "1.5Gi", "1000000" (bytes) → bytes; fiber::error(config_error) naming the flag.
std::int64_t parse_size(const std::string& text, const std::string& flag);

/// --durable: FIBER_DURABLE=true in the master's environment, and a run id made here unless one is
/// given (--env FIBER_RUN_ID=..., or this environment's), so that a master started again, by
/// --restarts or by the engine, takes up the same run. On docker and kubernetes the journal goes
/// on the first writable volume (a container's own files go with it). Throws config_error for
/// --restarts without --durable or on Slurm (which requeues the master's job itself), and for a durable container without a volume.
void apply_durable(run_options& o, const std::string& backend);

}  // namespace fiber::cli
