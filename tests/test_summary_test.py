#!/usr/bin/python3
"""The checks that keep a green run honest (scripts/test_summary.py, tests/gtest_verdict.py), fed
with reports a real test binary writes.

    test_summary_test.py GTEST_BINARY

GTEST_BINARY: a suite binary of this tree (process_test), run with filters that pass one test,
skip one (backend-gated on the local backend) and match none.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "scripts"))
import gtest_verdict  # noqa: E402
import test_summary  # noqa: E402

BINARY = None
PASSES = "process.a_move_only_argument_is_moved_into_the_childs_parameter"
SKIPS = "process.children_on_other_hosts_reach_the_master_over_tls_unless_zeromq_is_asked"


def run_binary(gtest_filter, report, results_dir=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FIBERTEST_", "GTEST_"))}
    if results_dir:
        env["FIBERTEST_RESULTS_DIR"] = results_dir
    args = [BINARY, f"--gtest_filter={gtest_filter}"] + ([f"--gtest_output=xml:{report}"] if report else [])
    return subprocess.run(args, env=env, capture_output=True, text=True).returncode


def junit(cases):
    """ctest's JUnit shape: (name, 'run'|'fail'|'skipped', output)."""
    body = ""
    for name, status, output in cases:
        skipped = '<skipped message="skipped"/>' if status == "skipped" else ""
        body += (f'<testcase name="{name}" status="{"run" if status == "skipped" else status}">'
                 f'{skipped}<system-out>{output}</system-out></testcase>')
    return f'<?xml version="1.0"?><testsuite>{body}</testsuite>'


class verdict(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.report = os.path.join(self.dir.name, "report.xml")

    def tearDown(self):
        self.dir.cleanup()

    def test_a_run_with_a_passing_test_passes(self):
        rc = run_binary(f"{PASSES}:{SKIPS}", self.report)
        code, lines = gtest_verdict.verdict(self.report, rc)
        self.assertEqual(code, 0, lines)
        self.assertIn("1 passed, 0 failed, 1 skipped", lines[-1])
        self.assertTrue(any("backend-gated:" in line for line in lines), lines)

    def test_a_run_where_every_test_skipped_is_a_skip_with_the_reason_last(self):
        rc = run_binary(SKIPS, self.report)
        code, lines = gtest_verdict.verdict(self.report, rc)
        self.assertEqual(code, 77, lines)
        self.assertTrue(lines[-1].startswith("backend-gated: children on other hosts only"), lines)

    def test_a_filter_that_matches_nothing_fails(self):
        rc = run_binary("process.no_such_test", self.report)
        self.assertNotEqual(rc, 0)  # tests/test_main.cpp refuses an empty run
        code, lines = gtest_verdict.verdict(self.report, rc)
        self.assertEqual(code, 1, lines)

    def test_no_report_fails(self):
        code, lines = gtest_verdict.verdict(self.report, 0)
        self.assertEqual(code, 1)
        self.assertIn("never reached its tests", lines[-1])

    def test_a_nonzero_exit_fails_whatever_the_report_says(self):
        run_binary(PASSES, self.report)
        code, lines = gtest_verdict.verdict(self.report, 1)
        self.assertEqual(code, 1)
        self.assertIn("exited with 1", lines[-1])


class summary(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.results = os.path.join(self.dir.name, "results")
        os.mkdir(self.results)
        self.junit = os.path.join(self.dir.name, "junit.xml")
        self.tests = os.path.join(self.dir.name, "tests.json")

    def tearDown(self):
        self.dir.cleanup()

    def write(self, cases, entries):
        open(self.junit, "w").write(junit(cases))
        json.dump({"tests": [{"name": n, "command": c, "properties": p} for n, c, p in entries]}, open(self.tests, "w"))

    def entry(self, name, gtest_filter, backend=None):
        props = [{"name": "ENVIRONMENT", "value": [f"FIBERTEST_BACKEND={backend}"]}] if backend else []
        return (name, [BINARY, f"--gtest_filter={gtest_filter}"], props)

    def test_an_entry_that_ran_its_test_passes_the_check(self):
        run_binary(PASSES, None, self.results)  # the report tests/test_main.cpp keeps
        self.write([(PASSES, "run", "")], [self.entry(PASSES, PASSES)])
        code, lines = test_summary.summarize(self.junit, self.tests, self.results, strict=True)
        self.assertEqual(code, 0, lines)
        self.assertEqual(lines[-1], "1 passed, 0 failed, 0 skipped")

    def test_an_entry_that_passed_without_its_report_fails(self):
        # The same test passed on the local backend; its docker entry has no report: a binary that
        # exited 0 before its tests (a worker's fiber::init, a crash handler) would look like this.
        run_binary(PASSES, None, self.results)
        self.write([("docker:" + PASSES, "run", "")], [self.entry("docker:" + PASSES, PASSES, "docker")])
        code, lines = test_summary.summarize(self.junit, self.tests, self.results, strict=False)
        self.assertEqual(code, 1, lines)
        self.assertIn("Passed without running a test (1)", "\n".join(lines))

    def test_under_ci_only_gpu_and_backend_gated_skips_are_allowed(self):
        cases = [("example:gpu_pool", "skipped", "no GPU: neither nvidia-smi nor /proc/driver/nvidia reports one"),
                 ("a:b", "skipped", "x.cpp:3: Skipped\nbackend-gated: local backend only: pids"),
                 ("page:c", "skipped", "x.cpp:9: Skipped\nno Chromium here (/usr/bin/chromium)")]
        self.write(cases, [])
        code, lines = test_summary.summarize(self.junit, self.tests, self.results, strict=True)
        self.assertEqual(code, 1, lines)
        text = "\n".join(lines)
        self.assertIn("Skips CI does not allow (1)", text)
        self.assertIn("page:c: no Chromium here", text)
        self.assertEqual(test_summary.summarize(self.junit, self.tests, self.results, strict=False)[0], 0)

    def test_a_runners_inner_skips_reach_the_summary(self):
        report = os.path.join(self.dir.name, "inner.xml")
        run_binary(f"{PASSES}:{SKIPS}", report)
        gtest_verdict.main(["v", report, "0", os.path.join(self.results, f"{os.path.basename(BINARY)}--slurm-steps--1.xml")])
        self.write([("slurm-steps:process", "run", "")],
                   [("slurm-steps:process", ["/x/in_allocation.sh", BINARY], [])])
        code, lines = test_summary.summarize(self.junit, self.tests, self.results, strict=True)
        self.assertEqual(code, 0, lines)
        text = "\n".join(lines)
        self.assertIn(f"slurm-steps:process / {SKIPS}", text)
        self.assertIn("2 tests ran inside the whole-binary runs", text)

    def test_runs_over_parts_of_the_tree_are_read_together_and_an_entry_none_reported_fails(self):
        run_binary(PASSES, None, self.results)
        local, docker = self.entry(PASSES, PASSES), self.entry("docker:" + PASSES, PASSES, "docker")
        self.write([(PASSES, "run", "")], [local, docker])
        code, lines = test_summary.summarize(self.junit, self.tests, self.results, strict=False)
        self.assertEqual(code, 1, lines)
        self.assertIn(f"Never ran (1): entries of the tree that no ctest run reported\n  docker:{PASSES}", "\n".join(lines))
        self.assertEqual(lines[-1], "1 passed, 1 failed, 0 skipped")
        # The second run's file, beside the first: both entries reported.
        second = os.path.join(self.dir.name, "junit-docker.xml")
        open(second, "w").write(junit([("docker:" + PASSES, "skipped", "x.cpp:1: Skipped\nbackend-gated: not here")]))
        code, lines = test_summary.summarize(f"{self.junit},{second}", self.tests, self.results, strict=False)
        self.assertEqual(code, 0, lines)
        self.assertEqual(lines[-1], "1 passed, 0 failed, 1 skipped")

    def test_a_runner_whose_report_holds_no_passed_test_fails_the_check(self):
        self.write([("kubernetes-pod:process", "run", "")],
                   [("kubernetes-pod:process", ["/usr/bin/python3", "in_pod.py", "s", "b", BINARY], [])])
        code, lines = test_summary.summarize(self.junit, self.tests, self.results, strict=False)
        self.assertEqual(code, 1, lines)


if __name__ == "__main__":
    BINARY = sys.argv.pop(1)
    unittest.main(verbosity=2)
