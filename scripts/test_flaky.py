"""Repeats every test marked `timing` (or another mark) while the rest of the suite runs
beside it, and says how many of the repetitions each one passed. A timing test must pass all
of them: a test that fails by chance blocks everyone's landing.

    .venv/bin/python scripts/test_flaky.py [--runs 20] [--mark guest] [-k EXPR] [--quiet-machine]

The rest of the suite (`-m "not MARK"`) runs in a loop in the background, as it would in a
real `make test`, unless --quiet-machine. Exit 0 when every marked test passed every run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]


def outcomes(junit: Path) -> dict[str, str]:
    """test id → passed, failed or skipped, from a JUnit XML report."""
    result = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        result[name] = ("failed" if kinds & {"failure", "error"} else
                        "skipped" if "skipped" in kinds else "passed")
    return result


def background_suite(log: Path, mark: str) -> subprocess.Popen:
    """The rest of the suite, over and over, until stopped."""
    loop = (f"while true; do {' '.join(PYTEST)} -m 'not {mark}' tests >> {log} 2>&1; "
            f"echo 'suite round done' >> {log}; done")
    return subprocess.Popen(["bash", "-c", loop], cwd=REPO, start_new_session=True)


def stop_background(loop: subprocess.Popen) -> None:
    """Ends the loop, then interrupts its pytest (interrupt_group)."""
    loop.terminate()
    loop.wait()
    interrupt_group(loop.pid)


def interrupt_group(group: int, grace_s: float = 120) -> None:
    """Interrupts a pytest's process group as ^C would, so its fixtures tear down what they
    made (namespaces, emulators, servers); SIGKILL only past the grace period."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGINT)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


def run_marked_tests(argv: list[str]) -> None:
    """One round of the marked tests. Stopped (SIGTERM to this script), it is interrupted
    like the background suite, not killed: a killed pytest leaves its topologies up."""
    pytest = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        pytest.wait()
    finally:
        if pytest.poll() is None:
            interrupt_group(pytest.pid)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--mark", default="timing",
                        help="repeat the tests with this mark (default: timing)")
    parser.add_argument("-k", dest="keyword", help="only marked tests matching this expression")
    parser.add_argument("--quiet-machine", action="store_true",
                        help="do not run the rest of the suite alongside")
    args = parser.parse_args()
    # SIGTERM must stop the background loop too (it has a session of its own): unwind
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    work = Path(tempfile.mkdtemp(prefix="wanbench-flaky-"))
    background = None if args.quiet_machine else background_suite(work / "suite.log", args.mark)
    tally: dict[str, Counter] = {}
    started = time.monotonic()
    try:
        for run in range(1, args.runs + 1):
            junit = work / f"run{run}.xml"
            argv = PYTEST + ["-m", args.mark, f"--junitxml={junit}", "tests"]
            if args.keyword:
                argv += ["-k", args.keyword]
            run_marked_tests(argv)
            for name, outcome in outcomes(junit).items():
                tally.setdefault(name, Counter())[outcome] += 1
            failed = [n for n, c in tally.items() if c["failed"]]
            print(f"run {run}/{args.runs} ({time.monotonic() - started:.0f} s): "
                  f"{len(failed)} test(s) failed so far", flush=True)
    finally:
        if background is not None:
            stop_background(background)
    rounds = (work / "suite.log").read_text().count("suite round done") \
        if background is not None else 0
    print(f"\n{args.mark} tests, {args.runs} runs each"
          f"{'' if background is None else f', beside {rounds} full round(s) of the rest'}:")
    flaky = 0
    for name, counts in sorted(tally.items()):
        ran = counts["passed"] + counts["failed"]
        note = f"{counts['passed']}/{ran} passed" + (
            f", {counts['skipped']} skipped" if counts["skipped"] else "")
        flaky += counts["failed"] > 0
        print(f"  {'FLAKY ' if counts['failed'] else 'ok    '}{name}: {note}")
    print(f"{len(tally) - flaky} of {len(tally)} {args.mark} tests passed every run; "
          f"reports in {work}")
    return 1 if flaky or not tally else 0


if __name__ == "__main__":
    sys.exit(main())
