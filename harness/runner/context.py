"""What every point of one run shares: the run, and where its server and clients are."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.guest.record import GuestRecord
from harness.results.store import RunDir
from harness.scenario import Point, Scenario
from harness.topology.netns import NETNS_DIR


@dataclass
class RunContext:
    """What every point of one run shares."""

    scenario: Scenario
    scenario_dir: Path
    run_dir: RunDir
    run_id: str
    tsc_hz: float | None
    hardware_counters: bool
    backend: str | None = None
    on_event: Callable[[str], None] = print
    topology_manifest: dict[str, Any] = field(default_factory=dict)
    guest: GuestRecord | None = None  # the virtual machine this run is in; None: the host
    # a cluster run's hosts and their timing per point (harness.cluster.session); else empty
    cluster: dict[str, Any] = field(default_factory=dict)

    def raw_dir(self, point: Point, repetition: int, attempt: int) -> Path:
        """One attempt's raw logs; the first empties an interrupted attempt's, the later ones
        keep the earlier attempts' beside theirs."""
        raw = self.run_dir.raw_dir(point.point_id, repetition, fresh=attempt == 0)
        if attempt:
            raw = raw / f"attempt-{attempt}"
            raw.mkdir()
        return raw


@dataclass
class Endpoints:
    """Where the server listens and from which namespaces the clients run."""

    handle: Any  # harness.topology TopologyHandle
    server_host: str | None
    hot_host: str | None
    cold_host: str | None

    def prefix(self, host: str | None) -> list[str]:
        return self.handle.exec_prefix(host) if host else []

    def netns(self, host: str | None) -> Path | None:
        """The host's network namespace, entered by its prefix (None: this process's own)."""
        name = self.handle.netns(host) if host else None
        return NETNS_DIR / name if name else None

    def address(self, host: str | None) -> str:
        return self.handle.address(host) if host else "127.0.0.1"

    def sources(self, host: str | None) -> list[str] | None:
        """Addresses a client host may bind: many, so cold connections do not run out of ports."""
        return self.handle.addresses(host) if host else None

    @property
    def shared_host(self) -> bool:
        """Loopback: everything in this namespace, so the server takes any free port."""
        return self.server_host is None or self.handle.netns(self.server_host) is None


def endpoints(handle: Any) -> Endpoints:
    def first(hosts: list[str]) -> str | None:
        return hosts[0] if hosts else None
    return Endpoints(handle, first(handle.role_hosts("server")), first(handle.client_hosts("hot")),
                     first(handle.client_hosts("cold")))
