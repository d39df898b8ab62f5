#!/usr/bin/env python3
"""Every C++ snippet a reader copies from fiber's docs compiles.

The snippets: each ```cpp block of README.md and docs/*.md, and each example in a public
header's opening comment (lines written `//   code`; runs of them joined across a bare `//`).
Each is compiled on its own (-fsyntax-only) against the installed-layout headers: its
namespace-scope parts (#include, functions, classes, FIBER_REMOTE...) at global scope, its
statements in the body of a coroutine (so that both `.get()` and `co_await` compile there).
A discarded op is an error (-Werror=unused-result): a lazy op that is never awaited never runs.

Names a snippet uses without defining them (`xs`, a `cartpole` the text defined elsewhere) come
from CONTEXT below, keyed by the snippet's place; a new snippet that needs one fails until it is
added here, which is the point: the reader has to be able to make the snippet compile too.

    doc_snippets.py SOURCE_DIR CXX [INCLUDE_DIR...]
"""
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

COMMON = r"""
#include <fiber/fiber.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <span>
#include <string>
#include <tuple>
#include <vector>
// What the reader's program has and the snippet does not show.
template <class T> T& any();
template <class T> void use(const T&);
int add(int, int);
int square(int);
"""

# Names each snippet takes from the reader's program: `global` before the snippet, `body`
# statements before its own (values through any<T>()), `wrap` around a fragment of a class.
CARTPOLE = r"""
struct cartpole_step { std::array<double, 4> state; double reward; bool done; };
"""
CONTEXT = {
    "docs/getting_started.md#1": {},
    "docs/getting_started.md#2": {},
    "docs/getting_started.md#3": {
        "global": "void work(int, std::string); FIBER_REMOTE(work);",
        "body": "int arg1 = 1; std::string arg2;",
    },
    "docs/getting_started.md#4": {
        "body": "auto& xs = any<std::vector<int>>(); auto& pairs = any<std::vector<std::tuple<int, int>>>();"
                "auto& huge_range = any<std::vector<int>>();",
    },
    "docs/getting_started.md#5": {
        "global": CARTPOLE + "struct cartpole; void worker(fiber::managed_list<double>);",
        "body": "auto& envs = any<std::vector<fiber::proxy<cartpole>>>();",
    },
    "docs/getting_started.md#6": {},
    "docs/getting_started.md#7": {
        "global": "std::vector<double> local_gradient();",
        "body": "auto& me = any<fiber::ring_member>(); auto& weights = any<std::vector<double>>();"
                "auto& mine = any<std::vector<int>>(); auto& all = any<std::vector<int>>();",
    },
    "docs/getting_started.md#8": {"global": "asio::awaitable<void> my_coroutine(fiber::context&);"},
    "docs/getting_started.md#9": {"body": "auto& xs = any<std::vector<int>>();"},
    "docs/api.md#1": {
        "global": "struct state { double x; }; struct step_result { state s; double reward; };",
        "body": "auto& env1 = any<fiber::proxy<cartpole>>(); auto& env2 = any<fiber::proxy<cartpole>>();",
    },
    "docs/durable.md#1": {
        "global": "std::vector<std::uint64_t> seeds_of(int); double evaluate(std::uint64_t); FIBER_REMOTE(evaluate);"
                  "std::vector<double> step(const std::vector<double>&, const std::vector<std::uint64_t>&,"
                  " const std::vector<double>&); void save(const std::string&, const std::vector<double>&);",
        "body": "auto& pool = any<fiber::pool>(); std::vector<double> theta; int generations = 3;",
    },
    "README.md#1": {},
    "include/fiber/codec.hpp#1": {"wrap": "struct T { int x; };\ntemplate <> struct fiber::codec<T> {\n{snippet}\n};"},
    "include/fiber/managed.hpp#1": {
        "global": "void worker(fiber::managed_list<double>);",
        "body": "auto& mgr = any<fiber::async_manager>();",
    },
    "include/fiber/manager.hpp#1": {
        "global": CARTPOLE + "struct cartpole { explicit cartpole(int); cartpole_step step(int); };"
                            "FIBER_REMOTE_CLASS(cartpole, step);",
        "body": "auto& other = any<fiber::proxy<cartpole>>();",
    },
    "include/fiber/meta.hpp#1": {},
    "include/fiber/op.hpp#1": {"body": "auto& p = any<fiber::process>();"},
    "include/fiber/pool.hpp#1": {"body": "auto& xs = any<std::vector<int>>();"},
    "include/fiber/process.hpp#1": {},
    "include/fiber/registry.hpp#1": {},
    "include/fiber/remote_class.hpp#1": {
        "global": "struct step_result { double reward; };",
        "body": "auto& mgr = any<fiber::async_manager>();",
    },
    "include/fiber/ring.hpp#1": {},
    "include/fiber/shared.hpp#1": {
        "global": "std::vector<std::tuple<fiber::shared<std::vector<double>>, std::uint64_t>> "
                  "tasks_holding(const fiber::shared<std::vector<double>>&);",
        "body": "auto& params = any<std::vector<double>>(); auto& pool = any<fiber::pool>();",
    },
    "include/fiber/shared.hpp#2": {"body": "auto& model = any<std::vector<float>>();"},
}


def doc_blocks(path):
    blocks, block = [], None
    for line in open(path, encoding="utf-8"):
        if block is None and re.match(r"^```(cpp|c\+\+)\s*$", line):
            block = []
        elif block is not None and line.startswith("```"):
            blocks.append("".join(block))
            block = None
        elif block is not None:
            block.append(line)
    return blocks


def header_blocks(path):
    """Runs of `//   code` lines in the comment that opens the header."""
    blocks, block, gap = [], [], False
    for line in open(path, encoding="utf-8"):
        if line.startswith("/// @file"):
            continue
        if line.startswith("///"):  # the header's doc comment (Doxygen's @file description)
            line = "//" + line[3:]
        if not line.startswith("//"):
            break
        if line.startswith("//   "):
            block.append(line[5:])
            gap = False
        elif line.strip() == "//" and block and not gap:
            gap = True
        elif block:
            blocks.append("".join(block))
            block, gap = [], False
    if block:
        blocks.append("".join(block))
    return blocks


def code_of(line):
    return re.sub(r"//.*$", "", line).rstrip()


SCOPE_START = re.compile(r"^(#include|FIBER_REMOTE|FIBER_META|FIBER_REMOTE_CLASS|class |struct |template|namespace |int main)")
# A function's definition or declaration: `type name(params) {` or `type name(type a, type b);`.
FUNCTION = re.compile(r"^[\w:<>,\s*&]+?[\s*&]+(\w+)\s*\(([^()]*)\)\s*(const)?\s*(\{.*|;.*)$")


def is_declaration_params(params):
    params = params.strip()
    if not params:
        return True
    for p in re.split(r",(?![^<]*>)", params):
        p = p.strip()
        if re.search(r"[\"'&]\w|^\d|^&|\d$|\(", p) and not re.search(r"\w+\s*[&*]\s*\w+$", p):
            return False
        if len(re.findall(r"[\w:]+", p)) < 2:
            return False
    return True


def split(snippet):
    """(namespace-scope text, statements)."""
    outer, body = [], []
    lines = snippet.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        code = code_of(line)
        m = FUNCTION.match(code)
        top = SCOPE_START.match(code) or (m and not code.startswith(("auto ", "return ")) and "=" not in code.split("(")[0]
                                          and (m.group(4).startswith("{") or is_declaration_params(m.group(2))))
        if not top:
            body.append(line)
            i += 1
            continue
        # The whole declaration: up to where its braces close (a class, a function's body).
        depth = code.count("{") - code.count("}")
        outer.append(line)
        i += 1
        while depth > 0 and i < len(lines):
            outer.append(lines[i])
            depth += code_of(lines[i]).count("{") - code_of(lines[i]).count("}")
            i += 1
    return "\n".join(outer), "\n".join(body)


def translation_unit(key, snippet):
    ctx = CONTEXT[key]
    if "wrap" in ctx:
        return COMMON + ctx["wrap"].replace("{snippet}", snippet)
    outer, body = split(snippet)
    return (f"{COMMON}\n{ctx.get('global', '')}\n#line 1 \"{key}\"\n{outer}\n"
            f"asio::awaitable<void> fiber_doc_snippet() {{\n{ctx.get('body', '')}\n{{\n{body}\n}}\nco_return;\n}}\n")


def main():
    source, cxx, includes = sys.argv[1], sys.argv[2], sys.argv[3:]
    snippets = []
    for doc in ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(source, "docs")) if f.endswith(".md")):
        for n, b in enumerate(doc_blocks(os.path.join(source, doc)), 1):
            snippets.append((f"{doc}#{n}", b))
    inc = os.path.join(source, "include", "fiber")
    for h in sorted(os.listdir(inc)):
        if h.endswith(".hpp"):
            for n, b in enumerate(header_blocks(os.path.join(inc, h)), 1):
                snippets.append((f"include/fiber/{h}#{n}", b))
    unknown = [k for k, _ in snippets if k not in CONTEXT]
    gone = sorted(set(CONTEXT) - {k for k, _ in snippets})
    if unknown or gone:
        for k in unknown:
            print(f"{k}: a snippet this check does not know: add what it takes from the reader's program to "
                  f"CONTEXT in tests/doc_snippets.py (an empty {{}} when it needs nothing)")
        for k in gone:
            print(f"{k}: in CONTEXT but no longer in the docs: remove it from tests/doc_snippets.py")
        return 1

    flags = ["-std=c++20", "-fsyntax-only", "-Werror=unused-result", "-Wno-unused-variable"]
    flags += ["-I" + os.path.join(source, "include")] + ["-I" + i for i in includes]
    if "clang" in os.path.basename(cxx):  # what fiber's package tells a Clang program (CMakeLists.txt)
        flags += ["-DASIO_HAS_CO_AWAIT", "-DASIO_HAS_STD_COROUTINE"]

    def compile_one(item):
        key, snippet = item
        with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as f:
            f.write(translation_unit(key, snippet))
        try:
            r = subprocess.run([cxx, *flags, f.name], capture_output=True, text=True)
            return key, r.returncode, r.stderr, f.name
        finally:
            if r.returncode == 0:
                os.unlink(f.name)

    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
        for key, rc, err, path in ex.map(compile_one, snippets):
            if rc:
                failed += 1
                errors = [l for l in err.splitlines() if "error" in l][:8]
                print(f"FAIL {key} (as compiled: {path})\n  " + "\n  ".join(errors))
            else:
                print(f"ok   {key}")
    print(f"{len(snippets) - failed} of {len(snippets)} snippets compile")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
