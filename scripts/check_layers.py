#!/usr/bin/env python3
"""Checks that includes point only down the layers of docs/design.md ("Layers"):

    cli -> primitives -> runtime -> backend -> transport -> core

A source file under src/<layer>/ may include its own layer and the ones below; cli (the `fiber`
command) is the top. Public headers belong to a layer too: the API's core (error, config, codec,
...) may be included from anywhere, the awaitable op and its completion from the runtime up (they
wait on the runtime's loop), the primitives' headers only from the primitives and above. Prints each violation with the fix
and exits 1 if there is one.
"""
import pathlib
import re
import sys

ORDER = ["core", "transport", "backend", "runtime", "primitives", "cli"]
RANK = {name: i for i, name in enumerate(ORDER)}

# Public headers by the layer whose concept they carry.
PUBLIC = {
    "core": {"error", "config", "codec", "encoding", "log", "registry", "meta", "shared", "history", "detail/shared_entry",
             "detail/unique_function", "detail/message"},
    "runtime": {"context", "op", "detail/completion"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of_include(path):
    """The layer an include path belongs to, or None when it is outside the layering."""
    top = path.split("/", 1)[0]
    if top in RANK:
        return top
    if top == "fiber":
        name = path[len("fiber/"):].removesuffix(".hpp")
        for layer, names in PUBLIC.items():
            if name in names:
                return layer
        return "primitives"  # process, pool, queues, managers and their detail/ templates
    return None


def main(root):
    src = root / "src"
    problems = []
    for file in sorted(src.rglob("*")):
        if file.suffix not in (".hpp", ".cpp"):
            continue
        rel = file.relative_to(src)
        own = rel.parts[0] if len(rel.parts) > 1 else None
        if own not in RANK:
            continue
        for inc in INCLUDE.findall(file.read_text()):
            target = layer_of_include(inc)
            if target is None or RANK[target] <= RANK[own]:
                continue
            problems.append(f"src/{rel}: includes \"{inc}\" ({target}), above its own layer ({own}); "
                            f"move what it needs down to {own} or below, or pass it in from above")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) point up the layers ({' -> '.join(reversed(ORDER))})")
        return 1
    print("layers hold: " + " -> ".join(reversed(ORDER)))
    return 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)))
