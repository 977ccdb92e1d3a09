"""wb-sclient's connection-count guard agrees with LoadSpec's MAX_CONNS, the one owner."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clients.spec import MAX_CONNS, LoadSpec

KINDS = {"--hot-conns": "hot_conns", "--cold": "cold_conns", "--stream": "stream_conns"}


def sclient_takes(binary: Path, flag: str, value: int) -> bool:
    """Whether wb-sclient's parser takes `flag value`; the unknown flag after it stops the
    run at parsing either way."""
    out = subprocess.run([str(binary), flag, str(value), "--not-a-flag"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 2, out.stderr
    return "unknown option" in out.stderr


def python_takes(field: str, value: int) -> bool:
    try:
        LoadSpec(generator="sclient", targets=["127.0.0.1:8080"], **{field: value})
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("flag", KINDS)
@pytest.mark.parametrize("value", [-1, 1, MAX_CONNS, MAX_CONNS + 1])
def test_sclient_refuses_what_loadspec_refuses(sclient: Path, flag: str, value: int) -> None:
    assert sclient_takes(sclient, flag, value) == python_takes(KINDS[flag], value)
