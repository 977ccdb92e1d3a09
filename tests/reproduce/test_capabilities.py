"""What a machine lacks for a claim, read from the run that was made there."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.reproduce import capabilities


def runs_with(backend: str, cpus: int) -> SimpleNamespace:
    manifest = {"topology": {"backend": backend}, "cpu": {"count": cpus}}
    return SimpleNamespace(raw_manifests={"r1": manifest})


@pytest.mark.parametrize("backend,cpus,lacking", [
    ("userspace", 2, True),   # the emulator shares the generator's CPU: starves it
    ("userspace", 4, False),  # a CPU of its own
    ("netem", 2, False),      # in the kernel, on the sending CPU
])
def test_an_emulated_link_at_load_needs_netem_or_a_third_cpu(backend, cpus, lacking):
    why = capabilities.missing("emulated_link_at_load", runs_with(backend, cpus))
    assert (why is not None) is lacking
    if lacking:
        assert "sch_netem" in why and "2 CPUs" in why
