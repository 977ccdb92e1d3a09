"""Without CAP_BPF and CAP_SYS_ADMIN the loader refuses in one line that names the fix, with
its own exit status; with them it runs (test_counts.py, and the probe in
test_lifecycle.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("capsh") is None or os.geteuid() != 0,
                                reason="needs root and capsh (libcap2-bin) to drop capabilities")

NO_CAPABILITY = 3  # wb-ktrace's exit status (its --describe: exit.no_capability)


@pytest.mark.parametrize("args", [["--probe"], ["--pid", "1", "--duration", "1"]])
def test_without_cap_bpf_it_refuses_in_one_line_naming_the_fix(ktrace_built: Path,
                                                                args: list[str]):
    done = subprocess.run(["capsh", "--drop=cap_bpf,cap_sys_admin", "--", "-c",
                           'exec "$0" "$@"', str(ktrace_built), *args],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == NO_CAPABILITY
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("wb-ktrace: loading BPF programs needs CAP_BPF and CAP_PERFMON")
    assert "fix: run as root" in line

