"""In-kernel time over exactly a point's window, measured inside the kernel by wb-ktrace (eBPF,
harness/ktrace/): the server tree's event-dispatch and I/O system calls (calls, time on a CPU inside
them, ready descriptors per dispatch call) and every CPU's network softirqs per packet. Exact
counts, not samples; the columns are harness.results.format's KERNEL_TRACE_COLUMNS. Where the
kernel allows fentry, also the functions the papers timed (do_select ... dev_queue_xmit), per call
and per packet; where it does not, those columns are null and the layers above stand.

Like perfctl's perf, the loader starts before the window (it loads and verifies its programs
during the warm-up) and is switched on and off over a control channel, here its stdin. The same
driver (KernelTrace, probe) runs harness/ktrace/'s other tool, wb-whoran
(harness.metrics.whoran)."""

from __future__ import annotations

import asyncio
import functools
import json
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clients import pinning
from clients.paths import MissingBinary, binary
from harness import monotonic, procs
from harness.results.format import (
    KERNEL_DIRECTIONS,
    KERNEL_FAMILIES,
    KERNEL_FUNCTIONS,
    KERNEL_READY_FAMILIES,
    KERNEL_TRACE_COLUMNS,
    SERVER_CPU_SCOPE,
    kernel_column,
    kernel_function_column,
)

VMLINUX_BTF = Path("/sys/kernel/btf/vmlinux")
# harness/ktrace/'s two tools, built and probed alike: the server's calls and the softirqs, and
# who ran on one CPU (harness.metrics.whoran)
CALL_TIMER, WHO_RAN = "wb-ktrace", "wb-whoran"
# loading and verifying takes 0.1 s here; a CPU shared with a busy generator gives it half
ANSWER_TIMEOUT_S = 30.0


class KernelTraceFailed(RuntimeError):
    """A tracer did not start or did not answer: the point cannot have what it asked for."""


@dataclass(frozen=True)
class Support:
    """What this machine allows: tracepoints (the kernel columns) and fentry (function grain:
    the kernel_fn_* columns); detail says why not, or what works; functions_skipped: where
    fentry works, the functions it cannot time here and why (not in this kernel's BTF ...);
    functions_timed_as: those timed through the function their body now is (dev_queue_xmit,
    an inline wrapper of __dev_queue_xmit since Linux 5.19)."""

    tracepoints: bool
    fentry: bool
    detail: str
    functions_skipped: dict[str, str] = field(default_factory=dict)
    functions_timed_as: dict[str, str] = field(default_factory=dict)

    def function_grain(self) -> str:
        """What the kernel_fn_* columns will hold here, in a sentence."""
        if not self.tracepoints:
            return "no function grain (no kernel tracing at all)"
        if not self.fentry:
            return (f"no function grain: {self.detail.partition('; ')[2]}; the kernel_fn_* "
                    "columns are null and the kernel is measured at layer grain (system "
                    "calls, softirqs)")
        timed = [f for f in KERNEL_FUNCTIONS if f not in self.functions_skipped]
        skipped = "; ".join(f"{f} skipped: {why}" for f, why in self.functions_skipped.items())
        renamed = "; ".join(f"{f} timed as {body}" for f, body in self.functions_timed_as.items())
        return (f"function grain (fentry) for {len(timed)} of {len(KERNEL_FUNCTIONS)} "
                f"functions" + (f" ({skipped}; their columns are null)" if skipped else "")
                + (f" ({renamed}: an inline wrapper of it here)" if renamed else ""))


@dataclass(frozen=True)
class WindowEdges:
    """The CLOCK_MONOTONIC instants (ns) a tracer's document (wb-ktrace's or wb-whoran's)
    counted between: when counting was switched on, and by when it was off. The runner's
    window is on the same clock (time.monotonic_ns)."""

    start_ns: int
    end_ns: int

    @classmethod
    def of(cls, document: dict[str, Any]) -> WindowEdges:
        return cls(document["window"]["start_ns"], document["window"]["end_ns"])


def _loader(tool: str) -> Path:
    try:
        return binary(tool)
    except MissingBinary as exc:
        if not VMLINUX_BTF.exists():  # the build skips it where the kernel has no BTF
            raise MissingBinary(f"this kernel has no BTF ({VMLINUX_BTF}), so {tool} is not "
                                f"built; fix: a kernel built with CONFIG_DEBUG_INFO_BTF=y "
                                f"(Debian's are)") from None
        raise exc


def probe(tool: str) -> tuple[dict[str, Any] | None, str]:
    """`tool --probe` (CALL_TIMER, WHO_RAN): it loads, attaches and detaches its programs. Its
    JSON line, or None and why it cannot run here (its one line, with the fix)."""
    try:
        done = subprocess.run([str(_loader(tool)), "--probe"], capture_output=True, text=True,
                              timeout=ANSWER_TIMEOUT_S)
    except MissingBinary as exc:
        return None, str(exc)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{tool} --probe: {exc}"
    if done.returncode != 0:
        return None, (_said(tool, done.stderr) or
                      f"{tool} --probe exited with status {done.returncode}")
    try:
        return json.loads(done.stdout), ""
    except ValueError:
        return None, (f"{tool} --probe said {done.stdout.strip()[:200]!r}, not its JSON line; "
                      f"fix: rebuild it (make)")


@functools.cache
def support() -> Support:
    """wb-ktrace's probe, once per process: its programs load, attach and detach, then it tries
    an fentry program."""
    probed, why = probe(CALL_TIMER)
    if probed is None:
        return Support(False, False, why)
    fentry = "fentry allowed" if probed["fentry"] else f"fentry refused ({probed['fentry_detail']})"
    return Support(True, probed["fentry"], f"tracepoints (tp_btf) work; {fentry}",
                   probed["functions_skipped"], probed["functions_timed_as"])


def recorded(manifests: Iterable[dict[str, Any]]) -> list[Support]:
    """What wb-ktrace could do where runs were made: each manifest's kernel_trace, recorded
    when its scenario asked to trace (a run that did not ask records none)."""
    return [Support(**r) for m in manifests if (r := m.get("kernel_trace"))]


def loaded_objects() -> list[str]:
    """The tracers' programs and maps loaded now (kt_ names; their .bss and .rodata are
    ktrace_b.* and whoran_b.*), and links to their programs, as bpftool lists them (none where
    bpftool is absent): what a loader that ended, however it ended, must not leave."""
    if shutil.which("bpftool") is None:
        return []

    def listed(kind: str) -> list[dict]:
        done = subprocess.run(["bpftool", "-j", kind, "list"], capture_output=True, text=True,
                              check=True, timeout=30)
        return json.loads(done.stdout or "[]")

    progs = {p["id"]: p["name"] for p in listed("prog") if p.get("name", "").startswith("kt_")}
    maps = [m["name"] for m in listed("map")
            if m.get("name", "").startswith(("kt_", "ktrace_b", "whoran_b"))]
    links = [f"link to {progs[link['prog_id']]}" for link in listed("link")
             if link.get("prog_id") in progs]
    return sorted(progs.values()) + sorted(maps) + links


def _said(tool: str, stderr: str) -> str:
    """A tracer's one-line reason, without its name."""
    lines = stderr.strip().splitlines()
    return lines[-1].removeprefix(f"{tool}: ") if lines else ""


class KernelTrace:
    """A tracer (CALL_TIMER, WHO_RAN) over one window: prepare() before it, start() at its
    start, stop() at its end (the document), close() whatever happened. args: what it traces;
    it runs on cpus (it sleeps through the window); name: its files in workdir."""

    def __init__(self, tool: str, args: list[str], cpus: set[int], workdir: Path, name: str):
        self.tool = tool
        self.argv = [str(_loader(tool)), *args]
        self.cpus = cpus
        self.stderr = workdir / f"{name}.stderr"
        self.document_path = workdir / f"{name}.json"
        self._proc: asyncio.subprocess.Process | None = None

    @classmethod
    def of_server(cls, server_pid: int, server_cpu: int, workdir: Path) -> KernelTrace:
        """The server tree's calls and every CPU's softirqs, beside the server, never on its
        CPU (unless that is the only one)."""
        return cls(CALL_TIMER, ["--pid", str(server_pid)],
                   pinning.all_but(server_cpu) or {server_cpu}, workdir, "ktrace")

    async def prepare(self) -> None:
        """Loaded, verified, following the server's forks; counting nothing yet."""
        with self.stderr.open("wb") as stderr:
            self._proc = await procs.spawn(pinning.pin_set_argv(self.cpus) + self.argv,
                                           stdin=asyncio.subprocess.PIPE,
                                           stdout=asyncio.subprocess.PIPE, stderr=stderr)
        await self._expect("ready", None)

    async def start(self, at_ns: int | None = None) -> None:
        """Counting from at_ns (CLOCK_MONOTONIC; None: now): told ahead, it waits for it."""
        await self._expect("started", _at("start", at_ns))

    async def stop(self, at_ns: int | None = None) -> dict[str, Any]:
        """Counting no more from at_ns (None: now), detached; the window's document (also
        kept in the raw dir): its edges are WindowEdges.of(it)."""
        line = await self._expect(None, _at("stop", at_ns))
        assert self._proc is not None
        await self._proc.wait()
        document: dict[str, Any] = json.loads(line)
        self.document_path.write_text(json.dumps(document, indent=1) + "\n")
        return document

    async def close(self) -> None:
        """Safe at any time and more than once: nothing of it is left in the kernel after,
        since its programs, maps and links are held by its descriptors only."""
        proc, self._proc = self._proc, None
        if proc is not None:
            await procs.stop(proc, timeout=ANSWER_TIMEOUT_S)

    async def _expect(self, answer: str | None, command: str | None) -> str:
        """Sends command (if any) and returns the next line, which must be answer (if any)."""
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        try:
            if command is not None:
                proc.stdin.write(f"{command}\n".encode())
                await proc.stdin.drain()
            line = await monotonic.within(proc.stdout.readline(), ANSWER_TIMEOUT_S)
        except (TimeoutError, ConnectionError) as exc:
            raise KernelTraceFailed(f"{self.tool} did not answer '{command or 'load'}' "
                                    f"({exc or 'timed out'})") from None
        text = line.decode(errors="replace").strip()
        if text and answer in (None, text):
            return text
        if not text:
            await proc.wait()  # it exited: its reason is on stderr
        said = (_said(self.tool, self.stderr.read_text(errors="replace"))
                if self.stderr.exists() else "")
        raise KernelTraceFailed(f"{self.tool} answered {text!r} to '{command or 'load'}'"
                                + (f": {said}" if said else ""))


def _at(command: str, at_ns: int | None) -> str:
    """A control command, at an instant of CLOCK_MONOTONIC if given."""
    return command if at_ns is None else f"{command} {at_ns}"


def _per(total: float, count: float) -> float | None:
    return total / count if count else None


def _softirq_columns(cpus: list[dict[str, Any]], scope: str = "") -> dict[str, Any]:
    """The network softirqs of `cpus` per direction: packets, softirqs, ns per packet; the
    columns named with scope before the direction (kernel_server_cpu_rx_...)."""
    row: dict[str, Any] = {}
    for direction in KERNEL_DIRECTIONS:
        packets = sum(cpu[f"{direction}_packets"] for cpu in cpus)
        row[kernel_column(scope + direction, "packets")] = packets
        row[kernel_column(scope + direction, "softirqs")] = sum(cpu[f"net_{direction}_count"]
                                                                for cpu in cpus)
        row[kernel_column(scope + direction, "ns_per_packet")] = _per(
            sum(cpu[f"net_{direction}_ns"] for cpu in cpus), packets)
    return row


def columns(document: dict[str, Any] | None, server_cpu: int | None = None) -> dict[str, Any]:
    """The window's kernel columns from wb-ktrace's document (the server's role); every one
    null without a document. The softirqs machine-wide, and on server_cpu alone where it is
    given. Per reply: per_reply(), once the replies are known."""
    row: dict[str, Any] = dict.fromkeys(KERNEL_TRACE_COLUMNS)
    if document is None:
        return row
    server = document["roles"]["server"]
    for family in KERNEL_FAMILIES:
        calls = server[family]
        row[kernel_column(family, "calls")] = calls["calls"]
        row[kernel_column(family, "ns_per_call")] = _per(calls["kernel_ns"], calls["calls"])
        if family in KERNEL_READY_FAMILIES:
            row[kernel_column(family, "ready_per_call")] = _per(calls["returned"],
                                                                calls["calls"])
    cpus = document["cpus"]
    row.update(_softirq_columns(cpus))
    if server_cpu is not None:
        row.update(_softirq_columns([cpu for cpu in cpus if cpu["cpu"] == server_cpu],
                                    SERVER_CPU_SCOPE))
    packets = {d: row[kernel_column(d, "packets")] for d in KERNEL_DIRECTIONS}
    # only the functions timed here are in the document (fentry refused: none)
    for function, calls in document.get("functions", {}).items():
        row[kernel_function_column(function, "calls")] = calls["calls"]
        row[kernel_function_column(function, "ns_per_call")] = _per(calls["kernel_ns"],
                                                                    calls["calls"])
        row[kernel_function_column(function, "ns_per_packet")] = _per(
            calls["kernel_ns"], packets[KERNEL_FUNCTIONS[function]])
    row["kernel_events_traced"] = document["events"]["traced"]
    row["kernel_trace_window_s"] = document["window_ns"] / 1e9
    row["kernel_server_on_cpu_s"] = document["on_cpu_ns"]["server"] / 1e9
    return row


def per_reply(row: dict[str, Any]) -> dict[str, Any]:
    """Each family's in-kernel ns per 2xx reply the generator counted: its calls' time over
    the traced window, the replies at their rate over the same span."""
    window_s, rate = row.get("kernel_trace_window_s"), row.get("reply_rate_rps")
    replies = window_s * rate if window_s and rate else None
    out: dict[str, Any] = {}
    for family in KERNEL_FAMILIES:
        calls = row.get(kernel_column(family, "calls"))
        per_call = row.get(kernel_column(family, "ns_per_call"))
        out[kernel_column(family, "ns_per_reply")] = (
            None if calls is None or not replies
            else 0.0 if calls == 0 else per_call * calls / replies)
    return out
