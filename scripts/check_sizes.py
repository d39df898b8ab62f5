#!/usr/bin/env python3
"""Rooms that stay small: no file under src/ or include/ over 500 lines, no function over 80, no
class with more than 25 methods (overloads count once). Fails naming the file, function or class
and its figure.

Functions are measured by lizard (pinned in check_sizes.requirements.txt, installed on first use
into a virtual environment of its own under ~/.cache/fiber/tools). A class's methods are the
distinct names lizard finds defined in it (in its body or out of line as Class::name); a name
that is only declared is not counted.

scripts/check_sizes_exceptions.txt lists what may be larger, each with its figure and its reason:
a data table, or a part not split yet. A listed item may not grow past its figure, and one that
came within the limits must leave the list.

    check_sizes.py [ROOT [EXCEPTIONS]]
"""
import collections
import fcntl
import os
import re
import subprocess
import sys

FILE_LINES, FUNCTION_LINES, CLASS_METHODS = 500, 80, 25
LIZARD = "1.24.3"
HERE = os.path.dirname(os.path.abspath(__file__))


def ensure_lizard():
    try:
        import lizard  # noqa: F401
        return
    except ImportError:
        pass
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    venv = os.path.join(cache, "fiber", "tools", f"lizard-{LIZARD}")
    python = os.path.join(venv, "bin", "python")
    if os.environ.get("FIBER_CHECK_SIZES_VENV") == python:
        sys.exit(f"check_sizes: lizard is not importable in {venv}: remove that folder and run again")
    os.makedirs(os.path.dirname(venv), exist_ok=True)
    with open(venv + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two checks at once (a suite's -j) install it once
        if not os.path.exists(os.path.join(venv, "ok")):
            print(f"check_sizes: installing lizard {LIZARD} into {venv}", file=sys.stderr)
            subprocess.run([sys.executable, "-m", "venv", "--clear", venv], check=True)
            subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--require-hashes",
                            "--only-binary=:all:", "-r", os.path.join(HERE, "check_sizes.requirements.txt")], check=True)
            open(os.path.join(venv, "ok"), "w").close()
    os.environ["FIBER_CHECK_SIZES_VENV"] = python
    os.execv(python, [python, os.path.abspath(__file__), *sys.argv[1:]])


def sources(root):
    out = []
    for top in ("src", "include"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            out += [os.path.join(folder, f) for f in files if f.endswith((".cpp", ".hpp", ".h", ".cu"))]
    return sorted(out)


CLASS = re.compile(r"\b(?:class|struct)\s+(?:\[\[[^\]]*\]\]\s*)?(\w+)\s*(?:final\s*)?[:{]")
NAMESPACE = re.compile(r"\bnamespace\s+([\w:]+)\s*\{")


def measure(root):
    """{(kind, name): figure} for everything measured."""
    import lizard
    figures = {}
    classes, namespaces = set(), set()
    for path in sources(root):
        rel = os.path.relpath(path, root)
        text = open(path, encoding="utf-8", errors="replace").read()
        figures[("file", rel)] = text.count("\n")
        classes.update(CLASS.findall(text))
        for n in NAMESPACE.findall(text):
            namespaces.update(n.split("::"))
    methods = collections.defaultdict(set)
    for result in lizard.analyze_files(sources(root)):
        for fn in result.function_list:
            figures[("function", fn.name)] = max(figures.get(("function", fn.name), 0), fn.length)
            owner, _, method = fn.name.rpartition("::")
            last = owner.rpartition("::")[2]
            if owner and last in classes and last not in namespaces:
                methods[owner].add(method)
    for owner, names in methods.items():
        figures[("class", owner)] = len(names)
    return figures


def exceptions(path):
    allowed = {}
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 3)
        if len(parts) < 4 or parts[0] not in ("file", "function", "class") or not parts[2].isdigit():
            sys.exit(f"{path}:{n}: write 'file|function|class NAME FIGURE REASON', not: {line}")
        allowed[(parts[0], parts[1])] = (int(parts[2]), parts[3])
    return allowed


def main():
    ensure_lizard()
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, ".."))
    limits = {"file": (FILE_LINES, "lines"), "function": (FUNCTION_LINES, "lines"), "class": (CLASS_METHODS, "methods")}
    listed = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "check_sizes_exceptions.txt")
    allowed = exceptions(listed)
    figures = measure(root)
    failures = []
    for (kind, name), figure in sorted(figures.items()):
        limit, unit = limits[kind]
        if figure <= limit:
            continue
        if (kind, name) not in allowed:
            failures.append(f"{kind} {name}: {figure} {unit} (at most {limit}): split it")
        elif figure > allowed[(kind, name)][0]:
            failures.append(f"{kind} {name}: {figure} {unit}, past the {allowed[(kind, name)][0]} that "
                            f"check_sizes_exceptions.txt allows it ({allowed[(kind, name)][1]}): split it, do not grow it")
    for (kind, name), (figure, why) in sorted(allowed.items()):
        now = figures.get((kind, name))
        if now is None or now <= limits[kind][0]:
            failures.append(f"{kind} {name}: within the limits now ({now if now is not None else 'gone'}): "
                            f"remove it from check_sizes_exceptions.txt")
    for f in failures:
        print("FAIL " + f)
    print(f"{len(figures)} files, functions and classes measured; {len(allowed)} listed exceptions; "
          f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
