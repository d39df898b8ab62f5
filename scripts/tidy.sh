#!/usr/bin/env bash
# Runs clang-tidy (Debian's clang-tidy-16) with the checks in .clang-tidy over every source file of
# the library and the fiber command, and the headers of include/fiber and src they include; fails
# on any finding. The compile commands come from a Clang tree of their own (build-tidy/, configured
# only, nothing built).
#
#   scripts/tidy.sh                 # every file
#   scripts/tidy.sh src/core        # the files under the given paths
#   scripts/tidy.sh --fix src/core  # apply the fixes clang-tidy offers, then review them
set -euo pipefail
cd "$(dirname "$0")/.."
tidy=${CLANG_TIDY:-clang-tidy-16}
if ! command -v "$tidy" >/dev/null || ! command -v run-clang-tidy-16 >/dev/null; then
  echo "tidy: $tidy is missing: apt-get install clang-tidy-16 (or set CLANG_TIDY)" >&2
  exit 2
fi
fix=()
if [[ ${1:-} == --fix ]]; then
  fix=(-fix -clang-apply-replacements-binary "$(command -v clang-apply-replacements-16)")
  shift
fi
cmake -S . -B build-tidy -G Ninja -DCMAKE_CXX_COMPILER=clang++-16 -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DFIBER_BUILD_TESTS=OFF -DFIBER_BUILD_EXAMPLES=OFF -DFIBER_BUILD_BENCH=OFF -DFIBER_WITH_CUDA=OFF >/dev/null
# run-clang-tidy takes regular expressions over the files of the compile commands.
paths=("$@")
[[ ${#paths[@]} -gt 0 ]] || paths=(src)
files=()
for p in "${paths[@]}"; do files+=("$PWD/${p%/}"); done
out=build-tidy/tidy.log
run-clang-tidy-16 -clang-tidy-binary "$(command -v "$tidy")" -p build-tidy -quiet -j "$(nproc)" "${fix[@]}" \
  "${files[@]}" >"$out" 2>&1 || true
# One finding is reported once per file that includes its header: count each place once. Only
# fiber's own files count (a check may point into a system header it compared ours with); an error
# counts wherever it is.
findings=$(grep -E "^$PWD/(src|include)/.*: warning: |^[^ ]*: error: " "$out" | sort -u || true)
if [[ -n $findings ]]; then
  echo "$findings"
  echo "tidy: $(wc -l <<<"$findings") findings (full output: $out)" >&2
  exit 1
fi
echo "tidy: clean ($(grep -c -- '-p=build-tidy' "$out" || true) files)"
