"""The HTTP parser under libFuzzer, seeded from the committed corpus."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import build

CORPUS = Path(__file__).resolve().parents[2] / "servers" / "fuzz" / "corpus"


def test_parser_fuzzing_finds_no_crash(tmp_path: Path) -> None:
    # 5 s in the suite, a smoke run over the committed corpus and a few thousand mutations of
    # it: the suite must stay under 12 minutes. Fuzzing that finds new paths is longer:
    # WANBENCH_FUZZ_SECONDS=600
    seconds = int(os.environ.get("WANBENCH_FUZZ_SECONDS", "5"))
    if shutil.which("clang") is None:
        pytest.skip("clang (libFuzzer) is not installed; fix: run `make system-deps`")
    fuzzer = build("build/fuzz/fuzz-http")
    assert len(list(CORPUS.iterdir())) >= 10
    work = tmp_path / "corpus"  # new inputs go here; the committed corpus is only read
    work.mkdir()
    out = subprocess.run(
        [str(fuzzer), f"-max_total_time={seconds}", "-max_len=16384", "-timeout=10",
         f"-artifact_prefix={tmp_path}/", str(work), str(CORPUS)],
        capture_output=True, text=True, timeout=seconds + 120)
    crashes = [p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "leak-",
                                                                        "timeout-", "oom-"))]
    assert out.returncode == 0 and not crashes, out.stderr[-3000:]
    assert "Done" in out.stderr  # it ran to its time limit
