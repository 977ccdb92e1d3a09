"""wb-ktrace's families are the results format's, and bad command lines (wb-ktrace's and
wb-whoran's) are refused in one line with exit 2."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.results.format import (
    KERNEL_DISPATCH_FAMILIES,
    KERNEL_FAMILIES,
    KERNEL_READY_FAMILIES,
)


def test_its_families_are_the_results_formats(ktrace_built: Path):
    done = subprocess.run([str(ktrace_built), "--describe"], capture_output=True, text=True,
                          check=True, timeout=10)
    described = json.loads(done.stdout)
    assert tuple(f["name"] for f in described["families"]) == KERNEL_FAMILIES
    assert tuple(f["name"] for f in described["families"]
                 if f["returned"] == "ready descriptors") == KERNEL_READY_FAMILIES
    assert tuple(f["name"] for f in described["families"] if f["dispatch"]) \
        == KERNEL_DISPATCH_FAMILIES


@pytest.mark.parametrize("argv,says", [
    ([], "give the measured process with --pid PID"),
    (["--pid", "x"], "--pid x: not a process id"),
    (["--pid", "1", "--duration", "0"], "--duration 0: not a number of seconds"),
    (["--frobnicate"], "--frobnicate: unknown option"),
])
def test_a_bad_command_line_is_refused_with_exit_2(ktrace_built: Path, argv: list[str],
                                                  says: str):
    done = subprocess.run([str(ktrace_built), *argv], capture_output=True, text=True,
                          timeout=10)
    assert done.returncode == 2
    assert done.stderr.splitlines()[0].startswith(f"wb-ktrace: {says}")


def test_a_process_that_does_not_exist_is_refused_with_exit_2(ktrace_bin: Path):
    done = subprocess.run([str(ktrace_bin), "--pid", "4194304"], capture_output=True,
                          text=True, timeout=10)
    assert done.returncode == 2
    assert done.stderr.strip() == "wb-ktrace: --pid 4194304: no such process"


@pytest.mark.parametrize("argv,says", [
    ([], "give the CPU with --cpu CPU and one measured tree"),
    (["--cpu", "0", "--pid", "1", "--generator-pid", "1"],
     "give the CPU with --cpu CPU and one measured tree"),
    (["--cpu", "4194304", "--pid", "1"], "--cpu 4194304: not a CPU of this machine"),
    (["--cpu", "0", "--pid", "1", "--late-us", "-1"], "--late-us -1: not a number"),
    (["--who-ran", "0"], "--who-ran: unknown option"),
])
def test_a_bad_who_ran_command_line_is_refused_with_exit_2(whoran_built: Path,
                                                          argv: list[str], says: str):
    done = subprocess.run([str(whoran_built), *argv], capture_output=True, text=True,
                          timeout=10)
    assert done.returncode == 2
    assert done.stderr.splitlines()[0].startswith(f"wb-whoran: {says}")
