#!/usr/bin/python3
"""The verdict on one run of a test binary, from gtest's XML report and the binary's exit code,
for the runners that start a whole binary somewhere else (tests/slurm/in_allocation.sh,
tests/kubernetes/in_pod.py): ctest sees only the runner's exit code, and a binary that ran no test
(every test skipped, a filter that matched nothing, a process that never reached main's tests)
exits 0 like one that passed.

    gtest_verdict.py REPORT.xml EXIT_CODE [KEEP_AS]

Prints what ran and exits 0 when at least one test ran and passed and none failed, 77 (ctest's
skip) when every test skipped (each reason printed, the last line the first reason), 1 otherwise.
KEEP_AS: a path the report is copied to, for scripts/test_summary.py, which counts the tests
inside (FIBERTEST_RESULTS_DIR/<binary>--<runner>--<pid>-<time>.xml).
Standard library only: Debian's /usr/bin/python3.
"""
import os
import shutil
import sys
import xml.etree.ElementTree as ET


def skip_reason(case):
    """The words after GTEST_SKIP() <<, without the file:line gtest puts first."""
    skipped = case.find("skipped")
    message = (skipped.get("message") if skipped is not None else "") or ""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if lines and lines[0].rsplit(":", 1)[-1].isdigit():
        lines = lines[1:]
    return " ".join(lines) or "(no reason given)"


def read(path):
    """{'passed': [name], 'failed': [name], 'skipped': [(name, reason)]} of one report."""
    out = {"passed": [], "failed": [], "skipped": []}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname')}.{case.get('name')}"
        if case.get("status") != "run":
            continue  # disabled, or filtered out
        if case.find("failure") is not None or case.find("error") is not None:
            out["failed"].append(name)
        elif case.get("result") == "skipped" or case.find("skipped") is not None:
            out["skipped"].append((name, skip_reason(case)))
        else:
            out["passed"].append(name)
    return out


def verdict(path, exit_code):
    """(exit code for ctest, lines to print)."""
    if not os.path.exists(path):
        return 1, [f"[verdict: FAILED: the binary wrote no report ({path}) and exited with {exit_code}: "
                   "it never reached its tests]"]
    try:
        r = read(path)
    except ET.ParseError as e:
        return 1, [f"[verdict: FAILED: the report {path} is not gtest's XML ({e}); the binary exited with {exit_code}]"]
    said = f"{len(r['passed'])} passed, {len(r['failed'])} failed, {len(r['skipped'])} skipped"
    lines = [f"[verdict: {name} skipped: {why}]" for name, why in r["skipped"]]
    if r["failed"]:
        return 1, lines + [f"[verdict: FAILED: {said}: {', '.join(r['failed'])}]"]
    if exit_code != 0:
        return 1, lines + [f"[verdict: FAILED: the binary exited with {exit_code} although its report says {said}]"]
    if r["passed"]:
        return 0, lines + [f"[verdict: {said}]"]
    if r["skipped"]:
        # ctest's skip: the summary reads the last line as the reason.
        return 77, lines + [f"[verdict: no test ran: {said}]", r["skipped"][0][1]]
    return 1, lines + ["[verdict: FAILED: the binary ran no test at all]"]


def main(argv):
    path, exit_code = argv[1], int(argv[2])
    code, lines = verdict(path, exit_code)
    if len(argv) > 3 and os.path.exists(path):
        os.makedirs(os.path.dirname(argv[3]), exist_ok=True)
        shutil.copyfile(path, argv[3])
    print("\n".join(lines))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
