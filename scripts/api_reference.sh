#!/usr/bin/env bash
# Builds the API reference (docs/Doxyfile: Doxygen over include/fiber) into OUT (default
# build/api; open OUT/html/index.html). Any warning — a public name without documentation, a
# broken reference — fails it and is printed.
#
#   scripts/api_reference.sh            # build/api/html/index.html
#   scripts/api_reference.sh /tmp/api
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/api}
command -v doxygen >/dev/null || { echo "api_reference: doxygen is missing: scripts/setup.sh installs it (apt-get install doxygen)" >&2; exit 2; }
mkdir -p "$out"
warnings="$out/warnings.txt"
rc=0
(cat docs/Doxyfile; echo "OUTPUT_DIRECTORY = $out"; echo "WARN_LOGFILE = $warnings") | doxygen - || rc=$?
if [ -s "$warnings" ]; then
  echo "api_reference: doxygen warned:" >&2
  cat "$warnings" >&2
  exit 1
fi
[ "$rc" -eq 0 ] || exit "$rc"
echo "api_reference: $out/html/index.html"
