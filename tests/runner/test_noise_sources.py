"""The machine's noise sources: steal sampled for `wanbench doctor`, read since boot for a
run's manifest (no wait at a run's start), and compare telling readings from configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analysis.compare import compat
from harness.metrics import cpu, noise


def _proc_stat(tmp_path: Path, name: str, *cpus: tuple[int, int]) -> dict[int, cpu.CpuTimes]:
    """A /proc/stat whose CPUs ran `busy` ticks and lost `stolen` ticks to the hypervisor."""
    path = tmp_path / name
    path.write_text("cpu  0 0 0 0 0 0 0 0\n" + "".join(
        f"cpu{n} {busy} 0 0 0 0 0 0 {stolen}\n" for n, (busy, stolen) in enumerate(cpus)))
    return cpu.all_cpu_times(path)


def test_steal_is_the_hypervisors_share_of_all_cpus_time(tmp_path: Path):
    boot = _proc_stat(tmp_path, "boot", (900, 100), (1000, 0))
    assert noise.steal_pct(boot) == pytest.approx(5.0)  # 100 of 2,000 ticks since boot
    later = _proc_stat(tmp_path, "later", (1350, 150), (1500, 0))
    assert noise.steal_pct(later, boot) == pytest.approx(5.0)  # 50 of the 1,000 between
    quiet = _proc_stat(tmp_path, "quiet", (1850, 150), (2000, 0))
    assert noise.steal_pct(quiet, later) == 0.0


def test_a_runs_manifest_reads_steal_since_boot_and_doctor_samples_it(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(noise.time, "sleep", slept.append)
    entry = noise.manifest_entry()
    assert noise.STEAL_SINCE_BOOT in entry and noise.STEAL_NOW not in entry
    assert slept == []
    names = {source.name for source in noise.sources()}
    assert noise.STEAL_NOW in names and slept == [0.5]


def test_compare_lists_a_changed_configuration_but_not_a_reading():
    def manifest(steal: str, cmdline: str) -> dict:
        return {"noise_sources": {
            noise.STEAL_SINCE_BOOT: {"name": noise.STEAL_SINCE_BOOT, "value": steal},
            "kernel command line": {"name": "kernel command line", "value": cmdline}}}

    assert compat.differences(manifest("0.8 %", "quiet"), manifest("2.1 %", "quiet")).listed \
        == []
    (changed,) = compat.differences(manifest("0.8 %", "quiet"),
                                    manifest("0.8 %", "mitigations=off")).listed
    assert changed.startswith("cmdline")
