#!/usr/bin/env python3
"""Closing summary of a ctest run from its JUnit file: which tests skipped and why, which
failed, and one line 'N passed, N failed, N skipped'."""
import sys
import xml.etree.ElementTree as ET


def skip_reason(output: str) -> str:
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith(": Skipped") and i + 1 < len(lines):
            return lines[i + 1].strip()
    # A program skipped by its own words (ctest SKIP_REGULAR_EXPRESSION): its last line says why.
    said = [line.strip() for line in lines if line.strip()]
    return said[-1][:300] if said else "(no reason printed)"


def main(path: str) -> int:
    passed, failed, skipped = [], [], []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name")
        output = case.findtext("system-out") or ""
        if case.find("skipped") is not None:
            skipped.append((name, skip_reason(output)))
        elif case.get("status") == "run":
            passed.append(name)
        else:
            failed.append(name)
    if skipped:
        print(f"Skipped tests ({len(skipped)}), and why:")
        for name, why in skipped:
            print(f"  {name}: {why}")
    if failed:
        print(f"Failed tests ({len(failed)}):")
        for name in failed:
            print(f"  {name}")
    print(f"{len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
