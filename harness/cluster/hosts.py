"""The agents of one measurement's hosts (harness.cluster.agent.HostAgent, one per worker):
started, their calls awaited while watching the scheduler (a worker that leaves fails the
wait, naming it), and every one stopped at the end, its logs kept first."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from clients import validity
from harness.cluster.agent import HostAgent
from harness.runner.processes import PointFailed

WATCH_S = 0.5  # how often a wait asks the scheduler for workers that left
# How often a wait looks at its calls (their state is local): a phase ends this close to its
# last answer, where each of a point's ten or so phases waited up to WATCH_S more
POLL_S = 0.005
STOP_TIMEOUT_S = 30.0
PHASE_TIMEOUT_S = 120.0  # a phase that does not end (start-up, cold ramp beyond it) fails
LEASE_MARGIN_S = 300.0  # an agent never told to stop stops itself this long after its end
# A worker that cannot be reached is taken for lost if the scheduler says so within this
LOSS_NOTICE_S = 5.0


def present_workers(client: Any) -> dict[str, dict[str, Any]]:
    """Worker address -> its info, asked of the scheduler now. Not client.scheduler_info():
    the client's periodic refresh replaces the identity it returns with one that lists no
    worker, so a worker could seem to have left."""
    return client.sync(client.scheduler.identity, n_workers=-1)["workers"]


class HostAgents:
    """workers: name → address at the scheduler. Calls come from one thread, under the
    client as the current one (the agents' handles find it so); stop() may come from another
    (the run interrupted), which also ends any wait."""

    def __init__(self, client: Any, workers: dict[str, str], described: Callable[[str], str]):
        self.client, self.workers, self.described = client, workers, described
        self.agents: dict[str, Any] = {}  # name → its HostAgent (an actor handle)
        self.futures: dict[str, Any] = {}  # name → the future that created it
        self.stopping = threading.Event()
        self._stop_once = threading.Lock()

    def start(self, lease_s: float) -> dict[str, Any]:
        """An agent on every worker; lease_s: how long each runs if never told to stop."""
        futures = {name: self.client.submit(HostAgent, lease_s + LEASE_MARGIN_S, actor=True,
                                            workers=[address], allow_other_workers=False,
                                            pure=False)
                   for name, address in self.workers.items()}
        # held while the point runs: an actor lives while its key is referenced, and a handle
        # unpickled without a current client holds no reference of its own
        self.futures = futures
        self.agents = self.wait(futures)
        return self.agents

    def wait(self, calls: dict[str, Any], timeout_s: float = PHASE_TIMEOUT_S) -> dict[str, Any]:
        """Name → result of each call (a Dask future or an actor's), or PointFailed naming a
        worker that left the scheduler, or the call that failed."""
        deadline, next_watch = time.monotonic() + timeout_s, 0.0
        while not all(call.done() for call in calls.values()):
            if self.stopping.is_set():
                raise PointFailed("the run was interrupted")
            now = time.monotonic()
            if now >= next_watch:
                self.check_present()
                next_watch = now + WATCH_S
            if now > deadline:
                late = ", ".join(name for name, call in calls.items() if not call.done())
                raise PointFailed(f"{late}: no answer within {timeout_s:.0f} s")
            time.sleep(POLL_S)
        results = {}
        for name, call in calls.items():
            try:
                results[name] = call.result()
            except PointFailed as exc:  # the host's own reason, named
                raise PointFailed(exc.reason.on(name)) from None
            except OSError as exc:  # its worker unreachable: lost, once the scheduler knows
                self.check_present(LOSS_NOTICE_S)
                raise PointFailed(f"{name}: {exc}") from None
            except Exception as exc:  # noqa: BLE001  # e.g. a target refused on that host
                raise PointFailed(f"{name}: {type(exc).__name__}: {exc}") from None
        return results

    def each(self, names: list[str], call: Callable[[Any, int], Any],
             timeout_s: float = PHASE_TIMEOUT_S) -> dict[str, Any]:
        """call(agent, index) on each named host at once, then their results."""
        return self.wait({name: call(self.agents[name], i) for i, name in enumerate(names)},
                         timeout_s)

    def check_present(self, within_s: float = 0.0) -> None:
        """PointFailed naming the first worker that left the scheduler, if one has or does
        within within_s."""
        deadline = time.monotonic() + within_s
        while True:
            present = present_workers(self.client)
            for name, address in self.workers.items():
                if address not in present:
                    raise PointFailed(validity.worker_lost(
                        name, f" ({self.described(name)}it left the scheduler)"), lost_host=name)
            if time.monotonic() >= deadline:
                return
            time.sleep(WATCH_S)

    def stop(self, keep_logs: Callable[[str, dict[str, bytes]], None] | None,
             on_event: Callable[[str], None]) -> None:
        """Every agent still on the scheduler stops its processes (one on a lost worker went
        with them), after keep_logs(name, its logs); once, whoever asks first."""
        self.stopping.set()
        with self._stop_once:
            present = present_workers(self.client)
            alive = {name: agent for name, agent in self.agents.items()
                     if self.workers[name] in present}
            self.agents = {}
            for name, agent in alive.items() if keep_logs else ():
                try:
                    keep_logs(name, agent.logs().result(timeout=STOP_TIMEOUT_S))
                except Exception as exc:  # noqa: BLE001  # the stop below matters more
                    on_event(f"{name}: its logs could not be fetched ({exc})")
            stops = {name: agent.stop() for name, agent in alive.items()}
            for name, stop in stops.items():
                try:
                    stop.result(timeout=STOP_TIMEOUT_S)
                except Exception as exc:  # noqa: BLE001  # say which host may hold processes
                    on_event(f"{name}: could not be told to stop ({exc}); its agent stops "
                             f"itself within {LEASE_MARGIN_S:.0f} s")
            self.futures = {}  # the agents may go now
