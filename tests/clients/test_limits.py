"""wb-sclient's description (`--describe`) is what its parser takes, and LoadSpec asks it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clients.spec import LoadSpec, sclient_description

try:
    from tests.conftest import build
except ImportError:  # plain `pytest`: tests/ is on sys.path
    from conftest import build  # type: ignore[no-redef]

SCLIENT = build("build/bin/wb-sclient")
LIMITS = sclient_description(str(SCLIENT))["limits"]
KINDS = {"--hot-conns": "hot_conns", "--cold": "cold_conns", "--stream": "stream_conns"}


def edges(limit: str) -> list[int]:
    """Each end of a whole-number range and one step past it."""
    low, high = LIMITS[limit]
    return [int(low) - 1, int(low), int(high), int(high) + 1]


def sclient_takes(flag: str, value: float) -> bool:
    """Whether wb-sclient's parser takes `flag value`; the unknown flag after it stops the
    run at parsing either way."""
    out = subprocess.run([str(SCLIENT), flag, repr(value), "--not-a-flag"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 2, out.stderr
    return "unknown option" in out.stderr


@pytest.mark.parametrize("limit", sorted(set(LIMITS) - {"target"}))
def test_the_parser_takes_exactly_the_described_range(limit: str) -> None:
    low, high = LIMITS[limit]
    below, above = low - max(abs(low) * 0.01, 1e-4), high * 1.01
    assert [sclient_takes(f"--{limit}", v) for v in (below, low, high, above)] == \
        [False, True, True, False]


def loadspec_takes(field: str, value: int) -> bool:
    other = {"cold_conns": 1} if field == "hot_conns" else {"hot_conns": 1}
    try:
        LoadSpec(generator="sclient", targets=["127.0.0.1:8080"], **{**other, field: value})
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("flag", KINDS)
def test_loadspec_refuses_what_the_binary_refuses(flag: str) -> None:
    for value in edges(flag.removeprefix("--")):
        assert loadspec_takes(KINDS[flag], value) == sclient_takes(flag, value), value


def test_targets_past_the_described_limit_are_refused_both_sides(tmp_path: Path) -> None:
    most = LIMITS["target"][1]
    targets = [f"127.0.0.1:{8000 + i}" for i in range(most + 1)]
    with pytest.raises(ValueError, match=f"at most {most}"):
        LoadSpec(generator="sclient", targets=targets, hot_conns=1)
    LoadSpec(generator="sclient", targets=targets[:most], hot_conns=1)
    out = subprocess.run([str(SCLIENT), "--target", ",".join(targets), "--hot-conns", "1"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 2 and f"at most {most} targets" in out.stderr


@pytest.mark.parametrize(("field", "value"), [
    ("rate_rps", float("inf")), ("rate_rps", float("nan")), ("duration_s", 1e30),
    ("connect_timeout_s", 0.0), ("cold_interval_s", 1e12), ("stream_mbps", 1e20)])
def test_loadspec_refuses_numbers_no_generator_takes(field: str, value: float) -> None:
    """For every generator, not only wb-sclient: the widest range any of them takes."""
    base = {"hot_conns": 1} if field != "stream_mbps" else {"stream_conns": 1}
    with pytest.raises(ValueError, match=field):
        LoadSpec(generator="asyncio", targets=["127.0.0.1:8080"], **{**base, field: value})
    within = {"rate_rps": 1e9, "duration_s": 1e7, "connect_timeout_s": 0.001,
              "cold_interval_s": 1e6, "stream_mbps": 1e6}[field]
    LoadSpec(generator="sclient", targets=["127.0.0.1:8080"], **{**base, field: within})
