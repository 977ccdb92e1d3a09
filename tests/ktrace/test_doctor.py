"""`wanbench doctor` says what kernel tracing this machine allows: tracepoints, fentry too, or
neither (then why, and the fix); and whether who ran on the measured CPUs is traced."""

from __future__ import annotations

import pytest

from harness import doctor
from harness.metrics import ktrace, whoran


def checked(monkeypatch: pytest.MonkeyPatch, allowed: ktrace.Support) -> doctor.Check:
    monkeypatch.setattr(ktrace, "support", lambda: allowed)
    return doctor.check_kernel_trace()


def test_neither_says_why_and_the_fix(monkeypatch: pytest.MonkeyPatch):
    check = checked(monkeypatch, ktrace.Support(False, False, (
        "loading BPF programs needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN; fix: run as "
        "root (or setcap cap_bpf,cap_perfmon+ep build/bin/wb-ktrace)")))
    assert not check.ok
    assert check.detail.startswith("neither tracepoints nor fentry: loading BPF programs needs")
    assert check.fix == "run as root (or setcap cap_bpf,cap_perfmon+ep build/bin/wb-ktrace)"


def test_tracepoints_without_fentry_works_at_layer_grain(monkeypatch: pytest.MonkeyPatch):
    check = checked(monkeypatch, ktrace.Support(True, False, (
        "tracepoints (tp_btf) work; fentry refused (loading an fentry program on do_select: "
        "Operation not permitted)")))
    assert check.ok
    assert check.detail.startswith("tracepoints only")
    assert "fentry refused (loading an fentry program on do_select" in check.detail
    assert "fentry" in check.fix


def test_both(monkeypatch: pytest.MonkeyPatch):
    check = checked(monkeypatch, ktrace.Support(True, True, "tracepoints (tp_btf) work; "
                                                "fentry allowed"))
    assert check.ok and check.detail.startswith("tracepoints and fentry") and not check.fix


def test_this_machine(ktrace_built: object):
    ktrace.support.cache_clear()
    check = doctor.check_kernel_trace()
    assert check.ok == ktrace.support().tracepoints


def test_who_ran_refused_says_why_the_fallback_and_the_fix(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(whoran, "cannot_run", lambda: (
        "loading BPF programs needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN; fix: run as "
        "root (or setcap cap_bpf,cap_perfmon+ep build/bin/wb-whoran)"))
    check = doctor.check_who_ran()
    assert not check.ok
    assert check.detail.startswith("loading BPF programs needs")
    assert "lower bound from /proc/stat" in check.detail
    assert check.fix == "run as root (or setcap cap_bpf,cap_perfmon+ep build/bin/wb-whoran)"


def test_who_ran_on_this_machine(whoran_built: object):
    whoran.cannot_run.cache_clear()
    check = doctor.check_who_ran()
    assert check.ok == (whoran.cannot_run() is None)
    assert doctor.check_who_ran in doctor.CHECKS and doctor.check_kernel_trace in doctor.CHECKS
