// `fiber run --backend local`: the program runs here, attached, and its children are local
// processes. --gpu, --cpu and --memory give the master what a local child with those needs gets.
#pragma once
#include "cli/run_options.hpp"

namespace fiber::cli {

/// Runs `o.command` here and returns its exit status (128 + N when signal N ended it).
/// --gpu N: N of this host's GPUs (the config key gpus) in CUDA_VISIBLE_DEVICES and
/// NVIDIA_VISIBLE_DEVICES, and the others left to its children (FIBER_GPUS, unless --env sets
/// it); --cpu N: pinned to N CPUs; --memory: its address space limited (RLIMIT_AS).
/// A request this host can never meet is errc::unsatisfiable, before anything runs.
int run_locally(const run_options& o);

}  // namespace fiber::cli
