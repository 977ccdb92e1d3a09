"""The cross-kernel comparison: functional results of every kernel, compare's verdict only
for kernels whose timings are comparable (an emulated CPU's are not)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from rich.console import Console

from clients.validity import EMULATED_CPU
from harness.guest.comparison import print_comparison
from tests.analysis.compare_synthetic import make_run


def _in_guest(run_dir: Path, accel: str) -> Path:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["guest"] = {"image": "/boot/vmlinuz-6.19.0", "accel": accel, "accel_why": "test",
                         "cpus": 2, "memory_mb": 1024, "pin": None}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    if accel == "tcg":  # as the recorder marks every point under an emulated CPU
        points = pd.read_parquet(run_dir / "points.parquet")
        points["valid"], points["invalid_reason"] = False, EMULATED_CPU
        points.to_parquet(run_dir / "points.parquet", index=False)
    return run_dir


def test_timings_compared_for_kvm_and_not_for_tcg(tmp_path, capsys):
    host = make_run(seed=1, repetitions=5, duration_s=10).write(tmp_path)
    kvm = _in_guest(make_run(seed=2, kernel="6.19.0-kvm", repetitions=5,
                             duration_s=10).write(tmp_path), "kvm")
    tcg = _in_guest(make_run(seed=3, kernel="6.19.0-tcg", repetitions=5,
                             duration_s=10).write(tmp_path), "tcg")
    status = print_comparison([host, kvm, tcg], Console(stderr=True, width=400))
    out, err = capsys.readouterr()
    assert status == 3, out  # compare's own: one run per kernel and no noise record
    assert "KVM guest" in out and "TCG guest" in out and "60/60" in out and "0/60" in out
    assert "## base 6.18.0-base vs candidate 6.19.0-kvm" in out
    assert "6.19.0-tcg" not in out.split("functional results", 1)[1].split("└", 1)[1]
    assert f"{tcg}: every point invalid for performance ({EMULATED_CPU})" in err


def test_an_emulated_base_compares_no_timings(tmp_path, capsys):
    tcg = _in_guest(make_run(seed=3, kernel="6.19.0-tcg").write(tmp_path), "tcg")
    host = make_run(seed=1).write(tmp_path)
    assert print_comparison([tcg, host], Console(stderr=True)) == 0
    assert "no kernel pair with comparable timings" in capsys.readouterr().err
