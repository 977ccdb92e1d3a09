"""wb-server fixtures: the normal and ASan+UBSan builds, every backend, clean teardown."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.servers import RunningServer, ServerConfig, describe, running

try:
    from tests.conftest import build
except ImportError:  # plain `pytest` rather than `python -m pytest`: tests/ is on sys.path
    from conftest import build  # type: ignore[no-redef]

BUILDS = {"normal": "build/bin/wb-server", "asan": "build/asan/bin/wb-server"}
SANITIZER_REPORTS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")

StartServer = Callable[..., RunningServer]


@pytest.fixture(scope="session", params=list(BUILDS))
def wb_binary(request: pytest.FixtureRequest) -> Path:
    return build(BUILDS[request.param])


@pytest.fixture(scope="session")
def normal_binary() -> Path:
    return build(BUILDS["normal"])


# Every backend the binary says it has: the test grid follows the table in servers/dispatch.c.
@pytest.fixture(params=describe(build(BUILDS["normal"])).dispatches)
def dispatch(request: pytest.FixtureRequest) -> str:
    return request.param


@contextlib.contextmanager
def server_factory(binary: Path, dispatch: str, tmp_path: Path) -> Iterator[StartServer]:
    """Start servers on demand; on the way out each must exit 0 with no sanitizer report."""
    started: list[tuple[RunningServer, Path]] = []
    with contextlib.ExitStack() as stack:

        def start(preexec_fn: Callable[[], None] | None = None, **cfg: Any) -> RunningServer:
            n = len(started)
            cfg.setdefault("dispatch", dispatch)
            config = ServerConfig(stats_path=tmp_path / f"stats{n}.json", **cfg)
            err_path = tmp_path / f"server{n}.stderr"
            err = stack.enter_context(err_path.open("wb"))
            server = stack.enter_context(running(config, binary, preexec_fn=preexec_fn,
                                                 stderr=err))
            started.append((server, err_path))
            return server

        yield start
    for server, err_path in started:
        text = err_path.read_text(errors="replace")
        assert not any(r in text for r in SANITIZER_REPORTS), text
        assert server.proc.returncode == 0, f"wb-server exited {server.proc.returncode}: {text}"


@pytest.fixture
def serve(wb_binary: Path, dispatch: str, tmp_path: Path) -> Iterator[StartServer]:
    """Every backend, normal and ASan+UBSan builds."""
    with server_factory(wb_binary, dispatch, tmp_path) as start:
        yield start


@pytest.fixture
def serve_normal(normal_binary: Path, dispatch: str, tmp_path: Path) -> Iterator[StartServer]:
    """Every backend, normal build only (for the slower checks)."""
    with server_factory(normal_binary, dispatch, tmp_path) as start:
        yield start
