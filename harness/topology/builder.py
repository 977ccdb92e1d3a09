"""bring_up(): a topology made real (or planned, for --dry-run), as a TopologyHandle."""

from __future__ import annotations

import atexit
import json
import signal
import subprocess
import threading
from abc import ABC, abstractmethod
from pathlib import Path

from harness.topology import cleanup, netns
from harness.topology.addressing import (
    AddressPlan,
    check_prefix,
    loopback_addresses,
    new_prefix,
    plan_addresses,
)
from harness.topology.backend_probe import choose_backend
from harness.topology.backends import BACKENDS, USERSPACE
from harness.topology.calibrate import CalibrationError
from harness.topology.calibrate import calibrate as calibrate_links
from harness.topology.commands import Step, build_steps, ns_exec, queue_limits
from harness.topology.ledger import Ledger, state_dir
from harness.topology.model import Topology, TopologyError

READY_TIMEOUT_S = 5.0


class TopologyHandle(ABC):
    """A live topology: where hosts are, how to run in them, what was measured; tears down.

    bring_up gives a LoopbackHandle (every host on this machine's lo) or a NamespaceHandle
    (a network namespace per host); its callers need not know which."""

    def __init__(self, topology: Topology, backend: str, probe: dict, prefix: str,
                 addresses: dict[str, tuple[str, ...]]) -> None:
        self.topology, self.backend, self.probe, self.prefix = topology, backend, probe, prefix
        self.calibration: dict = {}
        self.emulator_counters: dict = {}
        self.hosts = list(topology.hosts)
        self._addresses = addresses
        self.receive_cpus: dict[str, int] = {}  # hosts whose receive work was steered

    # ---- where things are ----
    def role_hosts(self, role: str) -> list[str]:
        return self.topology.role_hosts(role)

    def client_hosts(self, load: str) -> list[str]:
        return self.topology.client_hosts(load)

    def addresses(self, host: str) -> list[str]:
        """The host's addresses, first the one others reach it at; clients may bind any."""
        return list(self._addresses[self._check_host(host)])

    def address(self, host: str) -> str:
        """IPv4 address the other hosts reach host at (127.0.0.1 for a loopback server)."""
        return self.addresses(host)[0]

    @abstractmethod
    def exec_prefix(self, host: str) -> list[str]:
        """The argv prefix that runs a command in host's network."""

    @abstractmethod
    def netns(self, host: str) -> str | None:
        """The host's network namespace; None when it is this machine's own."""

    @abstractmethod
    def emulator_pids(self) -> list[int]:
        """The link emulators (wb-linkem) forwarding this topology's packets, if any."""

    @abstractmethod
    def _queue_limits(self, link: str) -> dict[str, int]:
        """Queue limit in packets per direction of link, as the builder set it."""

    def steer_receive(self, host_cpus: dict[str, int]) -> None:
        """Each host whose stack asks for it (receive_on_own_cpu) processes the packets it
        receives on the CPU host_cpus gives it, where its processes are pinned."""
        for host, cpu in host_cpus.items():
            if self.topology.hosts[self._check_host(host)].stack.receive_on_own_cpu:
                self._steer(host, cpu)
                self.receive_cpus[host] = cpu

    def _steer(self, host: str, cpu: int) -> None:
        raise TopologyError(f"host {host}: receive_on_own_cpu needs a namespace topology")

    def _check_host(self, host: str) -> str:
        if host not in self.topology.hosts:
            raise TopologyError(f"unknown host {host!r}; hosts are {', '.join(self.hosts)}")
        return host

    def manifest(self) -> dict:
        links = {}
        for name, spec in self.topology.links.items():
            limits = self._queue_limits(name)
            links[name] = {"a": spec.a, "b": spec.b, "wiring": BACKENDS[self.backend].wiring(spec),
                           "configured_rtt_ms": spec.rtt_ms(),
                           **{d: {**spec.direction(d).model_dump(),
                                  "queue_limit_packets": limits.get(d)}
                              for d in ("a_to_b", "b_to_a")}}
        return {
            "file": self.topology.source_file, "name": self.topology.name,
            "backend": self.backend, "probe": self.probe, "prefix": self.prefix,
            "calibration": self.calibration, "links": links,
            "hosts": {h: {"role": self.topology.hosts[h].role, "netns": self.netns(h),
                          "addresses": self.addresses(h),
                          "stack": self.topology.hosts[h].stack.model_dump(),
                          "receive_cpu": self.receive_cpus.get(h)} for h in self.hosts},
            "emulator_counters": self.emulator_counters,
        }

    # ---- lifetime ----
    def __enter__(self) -> TopologyHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    @abstractmethod
    def detach(self) -> None:
        """Leaves the topology up after this process exits (`wanbench topo up`)."""

    @abstractmethod
    def teardown(self) -> None:
        """Takes down what bring_up built, keeping what it measured. Idempotent."""


class LoopbackHandle(TopologyHandle):
    """Every host on this machine's lo: nothing was built, so nothing runs elsewhere or stays."""

    def __init__(self, topology: Topology, backend: str, probe: dict, prefix: str) -> None:
        super().__init__(topology, backend, probe, prefix, loopback_addresses(topology))

    def exec_prefix(self, host: str) -> list[str]:
        self._check_host(host)
        return []

    def netns(self, host: str) -> None:
        self._check_host(host)
        return None

    def emulator_pids(self) -> list[int]:
        return []  # nor links to emulate

    def _queue_limits(self, link: str) -> dict[str, int]:
        return {}  # a loopback topology has no links

    def detach(self) -> None:
        pass  # nothing was built: nothing is left up

    def teardown(self) -> None:
        pass  # nor taken down


class NamespaceHandle(TopologyHandle):
    """A network namespace per host, joined by emulated links; the ledger records all of it."""

    def __init__(self, topology: Topology, backend: str, probe: dict, prefix: str,
                 plan: AddressPlan, ledger: Ledger) -> None:
        super().__init__(topology, backend, probe, prefix,
                         {name: host.addresses for name, host in plan.hosts.items()})
        self.plan, self.ledger = plan, ledger
        self._emulators: dict[str, tuple[subprocess.Popen, Path]] = {}
        self._previous_handlers: dict[int, object] = {}
        self._torn_down = False

    def exec_prefix(self, host: str) -> list[str]:
        return ["ip", "netns", "exec", self.netns(host)]

    def netns(self, host: str) -> str:
        return self.plan.hosts[self._check_host(host)].netns

    def emulator_pids(self) -> list[int]:
        return [proc.pid for proc, _ in self._emulators.values() if proc.poll() is None]

    def _queue_limits(self, link: str) -> dict[str, int]:
        return queue_limits(self.topology, next(lk for lk in self.plan.links if lk.name == link))

    def _steer(self, host: str, cpu: int) -> None:
        # RPS with one CPU in the mask: every packet the device receives is processed there
        devices = [link.a_dev if side == "a" else link.b_dev
                   for link, side, _ in self.plan.peer_links(host)]
        queues = " ".join(f"/sys/class/net/{dev}/queues/rx-*/rps_cpus" for dev in devices)
        self._run_steps([Step(ns_exec(self.netns(host), [
            "sh", "-c", f"set -e; for q in {queues}; do echo {1 << cpu:x} > $q; done"]))])

    def detach(self) -> None:
        self._restore_signals()
        atexit.unregister(self.teardown)
        self.ledger.detach()
        self._torn_down = True

    def teardown(self) -> None:
        """Stops emulators (keeping their counters), deletes namespaces. Idempotent."""
        if self._torn_down:
            return
        self._torn_down = True
        self._restore_signals()
        atexit.unregister(self.teardown)
        cleanup.stop_emulators(self.ledger)
        for link, (proc, stats) in self._emulators.items():
            log = stats.with_suffix(".log")
            self.emulator_counters[link] = {
                **(json.loads(stats.read_text()) if stats.exists() else {}),
                "exit_status": proc.wait(),
                "stderr": log.read_text() if log.exists() else ""}
        cleanup.remove_run(self.ledger)

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread may set handlers; exit paths still tear down
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous_handlers[signum] = signal.signal(signum, self._on_signal)

    def _restore_signals(self) -> None:
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        self._previous_handlers.clear()

    def _on_signal(self, signum: int, frame) -> None:
        previous = self._previous_handlers.get(signum)
        self.teardown()
        if callable(previous):
            previous(signum, frame)
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt
        else:
            raise SystemExit(128 + signum)

    # ---- building ----
    def _run_steps(self, steps) -> None:
        for step in steps:
            if step.creates and step.creates["kind"] == "netns":
                netns.create(self.ledger, step.creates["name"])
                continue
            entry = self.ledger.add(step.creates) if step.creates else None
            if step.spawn:
                self._spawn(step, entry)
                continue
            done = subprocess.run(step.argv, capture_output=True, text=True)
            if done.returncode != 0:
                raise TopologyError(f"`{step}` failed: {done.stderr.strip() or done.returncode}")

    def _spawn(self, step, entry: dict) -> None:
        stats = Path(step.notes["stats"])
        log = stats.with_suffix(".log")
        with open(log, "w") as err:
            # Own session: a terminal's ^C reaches us, and we stop the emulator in order.
            proc = self.ledger.spawn(entry, step.argv, stdout=subprocess.PIPE, stderr=err,
                                     text=True, start_new_session=True)
        self._emulators[step.link] = (proc, stats)
        timer = threading.Timer(READY_TIMEOUT_S, proc.kill)
        timer.start()
        try:
            ready = proc.stdout.readline().strip()
        finally:
            timer.cancel()
            proc.stdout.close()
        if ready != "ready":
            raise TopologyError(f"wb-linkem for link {step.link} did not start: "
                                f"{log.read_text().strip() or 'no output'}")


def state_dir_of(ledger: Ledger) -> Path:
    return ledger.path.parent


def linkem_path(backend: str) -> Path:
    """The emulator binary (a clear error when unbuilt); a name its steps never use where
    the backend runs none."""
    return BACKENDS[backend].binary_path() or Path(str(USERSPACE.binary))


def planned_commands(topology: Topology, backend: str, prefix: str) -> list[str]:
    """The exact commands bring_up would run for backend netem or userspace (dry run)."""
    if topology.loopback:
        return []
    return [str(s) for s in build_steps(topology, plan_addresses(topology, prefix), backend,
                                        linkem_path(backend), state_dir())]


def bring_up(topology: Topology, backend: str = "auto", run_prefix: str | None = None,
             calibrate: bool = True, handle_signals: bool = True) -> TopologyHandle:
    """Builds the topology; on any failure removes what it made and raises TopologyError.
    handle_signals: tear down on SIGINT/SIGTERM by itself; a caller that owns the signals
    (the runner) passes False and tears down through `with`."""
    prefix = check_prefix(run_prefix) if run_prefix else new_prefix()
    if topology.loopback:
        chosen, probe = choose_backend(backend, topology, None)
        return LoopbackHandle(topology, chosen, probe, prefix)
    plan = plan_addresses(topology, prefix)
    taken = [ns for ns in netns.names() if ns.startswith(prefix + "-")]
    if taken:
        raise TopologyError(f"run prefix {prefix} is in use by namespaces {', '.join(taken)}; "
                            "choose another prefix")
    ledger = Ledger.create(prefix, topology.source_file, backend)
    handle = NamespaceHandle(topology, backend, {}, prefix, plan, ledger)
    if handle_signals:
        handle._install_signals()
    atexit.register(handle.teardown)  # a caller that forgets `with` still cleans up on exit
    try:
        handle.backend, handle.probe = choose_backend(backend, topology, ledger)
        ledger.set_info(backend=handle.backend, name=topology.name,
                        hosts={h: p.netns for h, p in plan.hosts.items()})
        handle._run_steps(build_steps(topology, plan, handle.backend,
                                      linkem_path(handle.backend), state_dir_of(ledger)))
        if calibrate:
            handle.calibration = calibrate_links(topology, plan, handle.backend)
    except CalibrationError as exc:
        handle.teardown()
        raise CalibrationError(f"{exc}{lateness_note(handle.emulator_counters)}",
                               exc.results) from None
    except BaseException:
        handle.teardown()
        raise
    return handle


def lateness_note(counters: dict) -> str:
    """How late the emulator released packets: tells its own delay from the machine's."""
    parts = [f"{link} {d} mean {c[d]['late_us_mean']:.0f} µs, max {c[d]['late_us_max']:.0f} µs"
             for link, c in counters.items() for d in ("a_to_b", "b_to_a") if d in c]
    return f" [emulator release lateness: {'; '.join(parts)}]" if parts else ""
