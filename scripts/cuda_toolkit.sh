#!/usr/bin/env bash
# Prints the CMake arguments that give the GPU examples a CUDA compiler, or nothing.
#   - A CUDA of the user's own (nvcc on PATH, CUDACXX, CUDAToolkit_ROOT, CUDA_PATH, CUDA_HOME, or
#     /usr/local/cuda) wins: nothing is printed and CMake finds it as it always did.
#   - Otherwise NVIDIA's toolkit wheels, pinned below, are installed once from PyPI into a cache
#     folder outside the clone (FIBER_CACHE, else $XDG_CACHE_HOME/fiber, else ~/.cache/fiber), and
#     the arguments point CMake's FindCUDAToolkit and its CUDA language at them.
#   - FIBER_WITH_CUDA=OFF, or a cache that cannot be filled (no pip, no network), prints nothing:
#     everything else builds, and the GPU examples are left out, as on any machine without CUDA.
#     Under CI (or FIBER_REQUIRE_ENGINES=1) a cache that cannot be filled fails instead: CI builds
#     the GPU examples in every run.
# What it does is said on stderr; only the arguments go to stdout.
set -euo pipefail

say() { echo "cuda: $*" >&2; }
required() {
  local v=${FIBER_REQUIRE_ENGINES-${CI-}}
  [ -n "$v" ] && [ "$v" != 0 ] && [ "$v" != false ]
}

[ "${FIBER_WITH_CUDA:-AUTO}" = OFF ] && exit 0
if command -v nvcc >/dev/null || [ -n "${CUDACXX:-}" ] || [ -n "${CUDAToolkit_ROOT:-}" ] ||
   [ -n "${CUDA_PATH:-}" ] || [ -n "${CUDA_HOME:-}" ] || [ -x /usr/local/cuda/bin/nvcc ]; then
  say "using this machine's own CUDA toolkit"
  exit 0
fi

# CUDA 13's wheels are the first to carry the whole compiler (nvcc, cicc, cudafe++, fatbinary,
# nvlink); those of CUDA 12 hold only ptxas and libnvvm. One version for all five: nvcc checks that
# its headers and runtime are its own.
version=13.5.37
wheels=(
  "nvidia-cuda-nvcc==$version" "nvidia-cuda-crt==$version" "nvidia-nvvm==$version"
  "nvidia-cuda-runtime==$version" "nvidia-cuda-cccl==13.3.5.0.6"
)
cache=${FIBER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fiber}
dest=$cache/cuda-$version
root=$dest/nvidia/cu13

if [ ! -f "$dest/complete" ]; then
  mkdir -p "$cache"
  exec 9>"$cache/cuda.lock"
  flock 9   # two builds at once install it once
  if [ ! -f "$dest/complete" ]; then
    if ! python3 -m pip --version >/dev/null 2>&1; then
      say "installing python3-pip (to fetch NVIDIA's compiler wheels)"
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq python3-pip >/dev/null 2>&1 || true
    fi
    say "no CUDA toolkit on this machine: installing NVIDIA's CUDA $version wheels into $dest"
    rm -rf "$dest.partial"
    # Wheels only (no sdist runs code here), no dependencies beyond the five named, all pinned;
    # one pip call, since --target does not merge a second install into the same nvidia/ folder.
    if ! python3 -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
         --target "$dest.partial" "${wheels[@]}" >"$cache/cuda-pip.log" 2>&1 ||
       [ ! -x "$dest.partial/nvidia/cu13/bin/nvcc" ]; then
      rm -rf "$dest.partial"
      if required; then say "could not install them (see $cache/cuda-pip.log)"; exit 1; fi
      say "could not install them (see $cache/cuda-pip.log): the GPU examples are not built"
      exit 0
    fi
    # FindCUDAToolkit links CUDA::cudart by its unversioned name; the wheel ships only the soname.
    ln -sf libcudart.so.13 "$dest.partial/nvidia/cu13/lib/libcudart.so"
    rm -rf "$dest"
    mv "$dest.partial" "$dest"
    touch "$dest/complete"
  fi
fi
say "using NVIDIA's CUDA $version wheels in $root"
echo "-DCUDAToolkit_ROOT=$root -DCMAKE_CUDA_COMPILER=$root/bin/nvcc"
