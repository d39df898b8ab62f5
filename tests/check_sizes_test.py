#!/usr/bin/env python3
"""scripts/check_sizes.py on trees made here: each limit fails with its figure, a listed item may
not grow, and a listed item that came within the limits must leave the list."""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "check_sizes.py")


def check(files, listed=""):
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            open(os.path.join(root, path), "w").write(text)
        exceptions = os.path.join(root, "exceptions.txt")
        open(exceptions, "w").write(listed)
        r = subprocess.run([sys.executable, SCRIPT, root, exceptions], capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr


def function(name, lines):
    return f"int {name}(int x) {{\n" + "  x += 1;\n" * (lines - 3) + "  return x;\n}\n"


failed = []


def expect(what, got, code, *words):
    rc, out = got
    if rc != code or any(w not in out for w in words):
        failed.append(f"{what}: exit {rc} (wanted {code}), missing {[w for w in words if w not in out]}:\n{out}")


small = {"src/a.cpp": function("f", 10)}
expect("a tree within the limits", check(small), 0, "0 failure(s)")
expect("a file of 501 lines", check({"src/big.cpp": "//\n" * 501}), 1, "file src/big.cpp: 501 lines (at most 500)")
expect("a function of 81 lines", check({"src/f.cpp": function("long_one", 81)}), 1, "function long_one: 81 lines (at most 80)")
methods = "".join(f"  int m{i}() {{ return {i}; }}\n" for i in range(26))
expect("a class of 26 methods", check({"include/c.hpp": f"struct wide {{\n{methods}}};\n"}), 1,
       "class wide: 26 methods (at most 25)")
overloads = "".join(f"  int m(int, char (&)[{i + 1}]) {{ return {i}; }}\n" for i in range(30))
expect("overloads count once", check({"include/o.hpp": f"struct narrow {{\n{overloads}}};\n"}), 0, "0 failure(s)")
expect("a listed function at its figure", check({"src/f.cpp": function("long_one", 81)}, "function long_one 81 data: a table\n"),
       0, "1 listed exceptions; 0 failure(s)")
expect("a listed function that grew", check({"src/f.cpp": function("long_one", 90)}, "function long_one 81 data: a table\n"),
       1, "function long_one: 90 lines, past the 81", "do not grow it")
expect("a listed function that shrank within the limit", check(small, "function f 81 data: a table\n"), 1,
       "function f: within the limits now (10)", "remove it")
expect("a malformed list", check(small, "function f\n"), 1, "write 'file|function|class NAME FIGURE REASON'")

for f in failed:
    print("FAIL " + f)
print(f"{9 - len(failed)} of 9 checks as expected")
sys.exit(1 if failed else 0)
