#!/usr/bin/env python3
"""scripts/check_layers.py on trees made here: an include up the layers fails with the fix, and
docs/design.md's map of src/ must name every folder of the tree and no folder that is gone."""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "check_layers.py")

MAP = """# Design
```
src/core/               shared
src/runtime/            the engine
  links/                direct links
```
"""


def check(files):
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            open(os.path.join(root, path), "w").write(text)
        r = subprocess.run([sys.executable, SCRIPT, root], capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr


failed = []


def expect(what, got, code, *words):
    rc, out = got
    if rc != code or any(w not in out for w in words):
        failed.append(f"{what}: exit {rc} (wanted {code}), missing {[w for w in words if w not in out]}:\n{out}")


tree = {"docs/design.md": MAP, "src/core/a.hpp": "", "src/runtime/r.cpp": '#include "core/a.hpp"\n',
        "src/runtime/links/l.cpp": '#include "runtime/r.hpp"\n'}
expect("a tree that holds", check(tree), 0, "layers hold", "map matches")
expect("an include up the layers", check({**tree, "src/core/b.cpp": '#include "runtime/links/l.hpp"\n'}), 1,
       'src/core/b.cpp: includes "runtime/links/l.hpp" (runtime), above its own layer (core)')
expect("a folder the map leaves out", check({**tree, "src/runtime/hubs/h.cpp": ""}), 1,
       "src/runtime/hubs/: not in docs/design.md's map")
expect("a folder the map names that is gone", check({k: v for k, v in tree.items() if "links" not in k}), 1,
       "docs/design.md names src/runtime/links/, which is not in the tree")
expect("no design document", check({k: v for k, v in tree.items() if "docs" not in k}), 1,
       "docs/design.md: missing")

for f in failed:
    print("FAIL " + f)
print(f"{5 - len(failed)} of 5 checks as expected")
sys.exit(1 if failed else 0)
