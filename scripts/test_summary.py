#!/usr/bin/env python3
"""Closing summary of a ctest run, and the checks that keep a green run honest.

    test_summary.py JUNIT[,JUNIT...] [TESTS_JSON RESULTS_DIR]

JUNIT: ctest's --output-junit file, or the files of several ctest runs over parts of one tree, by
commas. TESTS_JSON: `ctest --show-only=json-v1` of the same tree (each entry's command and
environment; an entry that no JUnit file holds did not run, and fails). RESULTS_DIR: FIBERTEST_RESULTS_DIR of the run, where every gtest
binary keeps its XML report (tests/test_main.cpp) and the whole-binary runners keep theirs
(tests/gtest_verdict.py), named <binary>--<backend or runner>--<pid>-<time>.xml (pids come round again within a suite).

Prints the skips grouped by reason (the tests inside the runners' whole-binary runs too), the
failures, and one line 'N passed, N failed, N skipped'. Fails (exit 1) when a test failed, when a
ctest entry that passed ran no test (its gtest report does not hold its test as run and passed,
or a runner's report holds none), and, under CI (CI or FIBER_REQUIRE_ENGINES set), when a skip's
reason is neither "no GPU" nor "backend-gated:": any other skip is an engine or a tool that should
have been there.
"""
import json
import os
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import gtest_verdict  # noqa: E402

RUNNERS = ("slurm-steps", "kubernetes-pod")  # ctest entries that run a whole binary elsewhere
ALLOWED_UNDER_CI = ("no GPU", "backend-gated:")


def required():
    v = os.environ.get("FIBER_REQUIRE_ENGINES", os.environ.get("CI", ""))
    return v not in ("", "0", "false")


def output_skip_reason(output: str) -> str:
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith(": Skipped") and i + 1 < len(lines):
            return lines[i + 1].strip()
    # A program skipped by its own words (ctest SKIP_REGULAR_EXPRESSION or exit 77): its last line says why.
    said = [line.strip() for line in lines if line.strip()]
    return said[-1][:300] if said else "(no reason printed)"


def read_ctest(path):
    """[(name, 'passed'|'failed'|'skipped', output)] of ctest's JUnit file."""
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        output = case.findtext("system-out") or ""
        if case.find("skipped") is not None:
            state = "skipped"
        elif case.get("status") == "run":
            state = "passed"
        else:
            state = "failed"
        out.append((case.get("name"), state, output))
    return out


def entry_names(path):
    """Every ctest entry of the tree, by name."""
    return [test["name"] for test in json.load(open(path)).get("tests", [])]


def read_entries(path):
    """{ctest name: (binary basename, backend or runner, gtest filter or None)} for the entries that
    run a gtest binary: those gtest_discover_tests made (one test each) and the runners'."""
    entries = {}
    for test in json.load(open(path)).get("tests", []):
        command = test.get("command") or []
        env = {}
        for prop in test.get("properties", []):
            if prop.get("name") == "ENVIRONMENT":
                env.update(v.split("=", 1) for v in prop.get("value", []) if "=" in v)
        name = test["name"]
        runner = name.split(":", 1)[0]
        filters = [a.split("=", 1)[1] for a in command if a.startswith("--gtest_filter=")]
        if filters:
            entries[name] = (os.path.basename(command[0]), env.get("FIBERTEST_BACKEND", "local"), filters[0])
        elif runner in RUNNERS:
            binaries = [a for a in command if os.path.basename(a).endswith("_test")]
            if binaries:
                entries[name] = (os.path.basename(binaries[-1]), runner, None)
    return entries


def read_reports(directory):
    """({(binary, backend, test): result}, {(binary, runner): [gtest_verdict.read(...)]})."""
    tests, runs = {}, {}
    for file in sorted(os.listdir(directory)) if directory and os.path.isdir(directory) else []:
        parts = file[:-len(".xml")].split("--") if file.endswith(".xml") else []
        if len(parts) != 3:
            continue
        binary, backend, _ = parts
        try:
            r = gtest_verdict.read(os.path.join(directory, file))
        except ET.ParseError:
            continue  # a binary killed while writing: its ctest entry failed
        if backend in RUNNERS:
            runs.setdefault((binary, backend), []).append(r)
            continue
        for name in r["passed"]:
            tests[(binary, backend, name)] = ("passed", "")
        for name in r["failed"]:
            tests.setdefault((binary, backend, name), ("failed", ""))
        for name, why in r["skipped"]:
            tests.setdefault((binary, backend, name), ("skipped", why))
    return tests, runs


def summarize(junit, tests_json=None, results_dir=None, strict=None):
    """(exit code, lines to print)."""
    strict = required() if strict is None else strict
    cases = [case for path in junit.split(",") for case in read_ctest(path)]
    listed = tests_json and os.path.exists(tests_json)
    entries = read_entries(tests_json) if listed else {}
    ran_names = {name for name, _, _ in cases}
    never_ran = [name for name in entry_names(tests_json) if name not in ran_names] if listed else []
    tests, runs = read_reports(results_dir)
    checked = bool(entries) and bool(results_dir) and os.path.isdir(results_dir)
    passed, failed, skipped, empty, inner, entries_skipped = [], [], [], [], 0, 0
    for name, state, output in cases:
        entry = entries.get(name)
        if entry and entry[2] is None:  # a runner's whole-binary run
            reports = runs.get(entry[:2], [])
            for r in reports:
                inner += len(r["passed"]) + len(r["failed"]) + len(r["skipped"])
                skipped.extend((f"{name} / {t}", why) for t, why in r["skipped"])
            ran = any(r["passed"] for r in reports)
        elif entry:
            result = tests.get(entry)
            ran = result is not None and result[0] == "passed"
        else:
            ran = True  # judged by its own pass pattern (examples, compile errors, scripts)
        if state == "skipped":
            entries_skipped += 1
            result = tests.get(entry) if entry and entry[2] else None
            skipped.append((name, result[1] if result and result[0] == "skipped" else output_skip_reason(output)))
        elif state == "failed":
            failed.append(name)
        else:
            passed.append(name)
            if checked and not ran:
                empty.append(name)
    lines = []
    by_reason = {}
    for name, why in skipped:
        by_reason.setdefault(why, []).append(name)
    if by_reason:
        lines.append(f"Skipped ({len(skipped)}), by reason:")
        for why, names in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            lines.append(f"  {len(names)} x {why}")
            lines.extend(f"      {n}" for n in names)
    disallowed = [(n, why) for n, why in skipped if not why.startswith(ALLOWED_UNDER_CI)] if strict else []
    if disallowed:
        lines.append(f"Skips CI does not allow ({len(disallowed)}): only 'no GPU' and 'backend-gated:' may skip here")
        lines.extend(f"  {n}: {why}" for n, why in disallowed)
    if empty:
        lines.append(f"Passed without running a test ({len(empty)}): no gtest report holds their test as run and passed")
        lines.extend(f"  {n}" for n in empty)
    if never_ran:
        lines.append(f"Never ran ({len(never_ran)}): entries of the tree that no ctest run reported")
        lines.extend(f"  {n}" for n in never_ran)
    if failed:
        lines.append(f"Failed tests ({len(failed)}):")
        lines.extend(f"  {n}" for n in failed)
    if not checked:
        lines.append("(no gtest reports to check against: run through scripts/test.sh to check that every entry ran a test)")
    elif inner:
        lines.append(f"({inner} tests ran inside the whole-binary runs of {', '.join(RUNNERS)}; "
                     f"{len(skipped) - entries_skipped} of them skipped, listed above)")
    lines.append(f"{len(passed)} passed, {len(failed) + len(never_ran)} failed, {entries_skipped} skipped")
    return (1 if failed or empty or disallowed or never_ran else 0), lines


def main(argv):
    code, lines = summarize(*argv[1:4])
    print("\n".join(lines))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
