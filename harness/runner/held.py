"""A point's server and the cold generator holding its idle connections, started together by
one point × repetition, and kept running for the next one when the scenario's
hold_server_across_hot allows it: the two are in the same round (repetition) and differ only in
their hot load (Point.server_key). Each repetition starts its own, so repetitions stay
independent. Only a run on one machine holds them (harness.runner.run.LocalPoints); a
cluster's points each start their own."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import clients
from harness.results.rows import cold_held
from harness.runner.load_side import LoadSide
from harness.runner.server_side import ServerSide
from harness.scenario import Point, Scenario

# What the next point × repetition must share with the held server's: the point's
# configuration less its hot load, and the repetition.
HoldKey = tuple[str, int]


def hold_key(scenario: Scenario, point: Point, repetition: int) -> HoldKey | None:
    """What the point must share with the previous one to run on its server and cold
    connections; None when the scenario does not hold them across points."""
    return (point.server_key, repetition) if scenario.hold_server_across_hot else None


@dataclass
class ServerWithCold:
    """A server and its cold generator (None without cold load), children of the point that
    started them (their logs in its raw directory); the server's CPU budget is its own."""

    server: ServerSide
    cold_load: LoadSide
    target: str = ""  # the server's ADDR:PORT, once started
    cold_spec: clients.LoadSpec | None = None
    cold_proc: asyncio.subprocess.Process | None = None

    async def cold_held(self, kept: bool) -> int | None:
        """The cold connections held at a point's end (None without cold load). kept: the
        generator goes on to the next point, so they are counted from its sockets; else it
        is stopped and its document says."""
        if self.cold_proc is None or self.cold_spec is None:
            return None
        if kept:
            return await self.cold_load.established(self.cold_proc, self.cold_spec)
        document = await self.cold_load.stop_cold(self.cold_proc, self.cold_spec)
        return cold_held(document) if document is not None else None

    async def stop(self) -> None:
        """The cold generator, then the server stopped, and the budget's group removed."""
        await self.server.stop()  # its children are the cold generator's too


class HeldServer:
    """The server and cold connections one point × repetition left running for the next.
    What is held is stopped as soon as the next point needs others (before its topology may
    go: release_unless), and when the run ends, a stop signal's teardown too (release)."""

    def __init__(self) -> None:
        self.key: HoldKey | None = None
        self.held: ServerWithCold | None = None

    async def release_unless(self, key: HoldKey | None) -> None:
        """Stops what is held unless it was kept for key."""
        if self.held is not None and (key is None or key != self.key):
            held, self.held = self.held, None
            await held.stop()

    def take(self, key: HoldKey | None) -> ServerWithCold | None:
        """What was kept for key, no longer held (a point that fails on it stops it), or
        None."""
        if self.held is None or key is None or key != self.key:
            return None
        held, self.held = self.held, None
        return held

    def keep(self, key: HoldKey, server: ServerWithCold) -> None:
        self.key, self.held = key, server

    async def release(self) -> None:
        await self.release_unless(None)
