#!/usr/bin/env python3
"""Checks that includes point only down the layers of docs/design.md ("Layers"):

    cli -> primitives -> runtime -> backend -> transport -> core

A source file under src/<layer>/ may include its own layer and the ones below; cli (the `fiber`
command) is the top. Public headers belong to a layer too: the API's core (error, config, codec,
...) may be included from anywhere, the awaitable op and its completion from the runtime up (they
wait on the runtime's loop), the primitives' headers only from the primitives and above. Prints each violation with the fix
and exits 1 if there is one.

It also checks that docs/design.md's map of the tree (the block that lists `src/<layer>/` with
its folders indented below) names every folder under src/ and no folder that is gone, so a
reader who finds a part from the map finds it in the tree.
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


MAP_TOP = re.compile(r"^src/(\w+)/")
MAP_SUB = re.compile(r"^  (\w+)/")


def map_problems(root):
    """Folders under src/ that docs/design.md's map leaves out, and folders it names that are gone."""
    design = root / "docs" / "design.md"
    if not design.exists():
        return [f"docs/design.md: missing; its map of src/ is what this check compares the tree with"]
    named, top = set(), None
    for line in design.read_text().splitlines():
        if m := MAP_TOP.match(line):
            top = m.group(1)
            named.add(top)
        elif top and (m := MAP_SUB.match(line)):
            named.add(f"{top}/{m.group(1)}")
        elif not line.startswith(" "):
            top = None
    src = root / "src"
    actual = {str(d.relative_to(src)) for d in src.rglob("*") if d.is_dir() and len(d.relative_to(src).parts) <= 2}
    problems = [f"src/{d}/: not in docs/design.md's map of the tree; add a line for it (what it holds)"
                for d in sorted(actual - named)]
    problems += [f"docs/design.md names src/{d}/, which is not in the tree; remove or rename it there"
                 for d in sorted(named - actual)]
    return problems


def main(root):
    src = root / "src"
    problems = map_problems(root)
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
        print(f"{len(problems)} problem(s): includes must point down the layers ({' -> '.join(reversed(ORDER))}), "
              "and docs/design.md's map must name the folders of src/")
        return 1
    print("layers hold: " + " -> ".join(reversed(ORDER)) + "; docs/design.md's map matches src/")
    return 0


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)))
