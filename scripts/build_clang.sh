#!/usr/bin/env bash
# The test command's second and third configurations, each in a folder of its own:
#   build-clang/   Clang 16 on libstdc++ with libfiber as a shared library (a program sees only
#                  what the headers mark FIBER_API), its examples, and its unit and local tests (the
#                  tests of the library's parts link the same objects as a static archive; the
#                  tests' own sources at -O0, which compiles in two fifths of -O2's time);
#   build-libcxx/  Clang 16 on libc++: the library, the fiber command and the examples (the tests
#                  would need a GoogleTest built against libc++, which Debian does not package),
#                  at -O0: this tree checks that they compile, warning-free, and run (the pi
#                  example), and -O0 halves its compile.
# Extra arguments go to both configure steps (the test command gives the linker and the unity build).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=build-clang scripts/build.sh -DCMAKE_CXX_COMPILER=clang++-16 -DBUILD_SHARED_LIBS=ON -DFIBER_BUILD_TESTS=ON \
  -DFIBER_BUILD_EXAMPLES=ON -DFIBER_BUILD_BENCH=OFF -DBUILD_TESTING=ON -DFIBER_WERROR=ON -DFIBER_DEBUG_INFO=lines \
  -DFIBER_WITH_CUDA=OFF -DFIBER_TEST_CXX_FLAGS=-O0 "$@"
libcxx=-stdlib=libc++
BUILD_DIR=build-libcxx scripts/build.sh -DCMAKE_CXX_COMPILER=clang++-16 -DCMAKE_CXX_FLAGS="$libcxx" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -DNDEBUG" \
  -DCMAKE_EXE_LINKER_FLAGS="$libcxx" -DCMAKE_SHARED_LINKER_FLAGS="$libcxx" -DFIBER_BUILD_TESTS=OFF \
  -DFIBER_BUILD_EXAMPLES=ON -DFIBER_BUILD_BENCH=OFF -DBUILD_TESTING=OFF -DFIBER_WERROR=ON -DFIBER_WITH_CUDA=OFF "$@"
