#!/usr/bin/env bash
# What fiber costs a program's build, measured side by side:
# - compile time and peak memory of a one-file program including <fiber/fiber.hpp> against one
#   including <asio.hpp> alone (the floor: fiber's API is built on Asio), ROUNDS times each,
#   alternating, with the flags a program gets from fiber::fiber;
# - the size of examples/hello linked against the static library and against the shared one,
#   stripped and not, and the link's time (the same objects, from the shared build's tree:
#   libfiber_internal.a is its static archive).
#
#   bench/build_cost.sh [STATIC_TREE=build] [SHARED_TREE=build-shared] [ROUNDS=5]
# The shared tree: BUILD_DIR=build-shared scripts/build.sh -DBUILD_SHARED_LIBS=ON -DFIBER_BUILD_EXAMPLES=ON
set -euo pipefail
cd "$(dirname "$0")/.."
static_tree=${1:-build}
shared_tree=${2:-build-shared}
rounds=${3:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$static_tree/CMakeCache.txt")
flags=(-std=gnu++20 -O2 -g1 -Iinclude -DASIO_SEPARATE_COMPILATION -DASIO_NO_DEPRECATED)
printf '#include <fiber/fiber.hpp>\nint main() { return fiber::is_worker(); }\n' >"$work/with_fiber.cpp"
printf '#include <asio.hpp>\nint main() { asio::io_context io; return static_cast<int>(io.run()); }\n' >"$work/with_asio.cpp"
measure() {  # prints "seconds peak_kib"
  /usr/bin/time -f '%e %M' -o "$work/t" "$@" >/dev/null 2>&1
  cat "$work/t"
}
declare -A secs kib
for r in $(seq "$rounds"); do
  for what in with_fiber with_asio; do
    read -r s k < <(measure "$cxx" "${flags[@]}" -c "$work/$what.cpp" -o "$work/$what.o")
    secs[$what]+="$s "
    kib[$what]+="$k "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
f_s=$(echo "${secs[with_fiber]}" | median); a_s=$(echo "${secs[with_asio]}" | median)
f_k=$(echo "${kib[with_fiber]}" | median); a_k=$(echo "${kib[with_asio]}" | median)
echo "compiler: $cxx ($rounds rounds, medians)"
printf 'compile  <fiber/fiber.hpp> %6.2f s %7d KiB peak | <asio.hpp> %6.2f s %7d KiB | ratio %.2fx time, %.2fx memory\n' \
  "$f_s" "$f_k" "$a_s" "$a_k" "$(echo "$f_s / $a_s" | bc -l)" "$(echo "$f_k / $a_k" | bc -l)"

# hello, linked both ways with the shared tree's compiler and its link line.
scxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$shared_tree/CMakeCache.txt")
obj=$(find "$shared_tree/examples" -name 'hello.cpp.o' | head -1)
libs=(-lzmq -lboost_json -lboost_container -lcurl -lssl -lcrypto -lyaml -lxxhash -ldl -pthread)
declare -A lsecs
for r in $(seq "$rounds"); do
  read -r s _ < <(measure "$scxx" -rdynamic "$obj" -o "$work/hello_static" "$shared_tree/libfiber_internal.a" "${libs[@]}")
  lsecs[static]+="$s "
  read -r s _ < <(measure "$scxx" -rdynamic "$obj" -o "$work/hello_shared" -L"$shared_tree" -lfiber -Wl,-rpath,"$PWD/$shared_tree" -pthread)
  lsecs[shared]+="$s "
done
"$work/hello_static" >/dev/null && "$work/hello_shared" >/dev/null  # both run
strip -o "$work/hello_static.stripped" "$work/hello_static"
strip -o "$work/hello_shared.stripped" "$work/hello_shared"
size() { stat -c %s "$1"; }
echo "hello ($scxx): static $(size "$work/hello_static") B ($(size "$work/hello_static.stripped") B stripped), link $(echo "${lsecs[static]}" | median) s" \
  "| shared $(size "$work/hello_shared") B ($(size "$work/hello_shared.stripped") B stripped) + libfiber.so $(size "$(readlink -f "$shared_tree/libfiber.so")") B, link $(echo "${lsecs[shared]}" | median) s"
