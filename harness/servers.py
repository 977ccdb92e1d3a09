"""wb-server from Python: its command line, readiness line, stats snapshots and counters."""

from __future__ import annotations

import contextlib
import functools
import json
import mmap
import os
import resource
import selectors
import signal
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clients import paths
from harness.yamlfile import nearest


@dataclass(frozen=True)
class ServerDescription:
    """What wb-server takes, as it says itself (`wb-server --describe`): its backends, accept
    policies, limits (inclusive ranges) and defaults. The binary decides them; every Python
    caller (ServerConfig, the scenario, `wanbench server`) asks this, and keeps no copy."""

    dispatches: tuple[str, ...]
    accept_policies: tuple[str, ...]
    limits: dict[str, tuple[int, int]]
    defaults: dict[str, Any]

    def check_dispatch(self, dispatch: str) -> str:
        if dispatch not in self.dispatches:
            raise ValueError(f"dispatch {dispatch!r} is not one of "
                             f"{', '.join(self.dispatches)}{nearest(dispatch, self.dispatches)}")
        return dispatch

    def check_accept(self, accept: str) -> str:
        """single (one accept per listener readiness), multi (until EAGAIN) or N (at most N)."""
        low, high = self.limits["accept"]
        if accept in self.accept_policies or (
                accept.isascii() and accept.isdigit() and low <= int(accept) <= high):
            return accept
        raise ValueError(f"accept {accept!r} is not allowed; allowed: "
                         f"{', '.join(self.accept_policies)}, or a number N from {low} to "
                         f"{high} (at most N accepts per readiness)")

    def check_limit(self, name: str, value: int) -> int:
        low, high = self.limits[name]
        if not low <= value <= high:
            raise ValueError(f"{name} {value} is outside {low}..{high}")
        return value


@functools.cache
def describe(binary: Path | None = None) -> ServerDescription:
    """wb-server's description (the built binary's, unless another is named)."""
    argv = [str(binary or paths.binary("wb-server")), "--describe"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    if done.returncode != 0:
        raise paths.MissingBinary(f"{argv[0]} --describe failed ({done.stderr.strip()}); fix: "
                                  f"run `make` in {paths.REPO_ROOT}")
    said = json.loads(done.stdout)
    return ServerDescription(
        dispatches=tuple(said["dispatches"]), accept_policies=tuple(said["accept_policies"]),
        limits={name: (low, high) for name, (low, high) in said["limits"].items()},
        defaults=said["defaults"])


def _default(name: str) -> Any:
    return field(default_factory=lambda: describe().defaults[name])


@dataclass
class ServerConfig:
    """One wb-server invocation (see servers/README.md for the flags); unset fields take the
    binary's defaults."""

    dispatch: str = _default("dispatch")
    accept: str = _default("accept")
    reply_bytes: int = _default("reply_bytes")
    listen: str = _default("listen")
    backlog: int | None = None
    workers: int = _default("workers")
    cpu: int | None = None
    stats_path: Path | str | None = None
    counters_path: Path | str | None = None  # read with Counters, at the reader's instant
    sink: bool = False
    source_mbps: float = 0.0  # > 0: send a paced stream to the connections (--source)
    min_wait_us: int = _default("min_wait_us")
    rt_signal_queue: int | None = None  # RLIMIT_SIGPENDING: the RT-signal queue length

    def __post_init__(self) -> None:
        said = describe()
        said.check_dispatch(self.dispatch)
        said.check_accept(self.accept)
        said.check_limit("reply_bytes", self.reply_bytes)
        said.check_limit("workers", self.workers)
        said.check_limit("min_wait_us", self.min_wait_us)
        said.check_limit("source_mbps", self.source_mbps)
        if self.sink and self.source_mbps:
            raise ValueError("sink and source_mbps: a server either receives the stream or "
                             "sends it")
        if self.backlog is not None:
            said.check_limit("backlog", self.backlog)
        if self.rt_signal_queue is not None:
            check_rt_signal_queue(self.rt_signal_queue)

    def argv(self, binary: Path | None = None) -> list[str]:
        # prlimit lowers the limit for the server alone (a process cannot raise its hard limit)
        limit = ([] if self.rt_signal_queue is None else
                 ["prlimit", f"--sigpending={self.rt_signal_queue}", "--"])
        argv = [*limit, str(binary or paths.binary("wb-server")), "--dispatch", self.dispatch,
                "--accept", self.accept, "--reply-bytes", str(self.reply_bytes),
                "--listen", self.listen]
        if self.backlog is not None:
            argv += ["--backlog", str(self.backlog)]
        if self.stats_path is not None:
            argv += ["--stats", str(self.stats_path)]
        if self.counters_path is not None:
            argv += ["--counters", str(self.counters_path)]
        if self.workers != 1:
            argv += ["--workers", str(self.workers)]
        if self.cpu is not None:
            argv += ["--cpu", str(self.cpu)]
        if self.sink:
            argv.append("--sink")
        if self.source_mbps:
            argv += ["--source", f"{self.source_mbps:g}"]
        if self.min_wait_us:
            argv += ["--min-wait-us", str(self.min_wait_us)]
        return argv


def check_rt_signal_queue(length: int) -> int:
    """A queue length this machine can give the server: at least 1, at most the hard limit."""
    hard = resource.getrlimit(resource.RLIMIT_SIGPENDING)[1]
    if length < 1 or (hard != resource.RLIM_INFINITY and length > hard):
        raise ValueError(f"rt_signal_queue {length} is outside 1..{hard}: RLIMIT_SIGPENDING "
                         f"(ulimit -i) can be lowered for the server, not raised past the "
                         f"hard limit {hard}")
    return length


def read_stats(path: Path | str) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def _file_version(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def snapshot_stats(proc_or_pid: subprocess.Popen[Any] | Any, path: Path | str,
                   timeout: float = 5.0) -> dict[str, Any]:
    """Ask the server for a stats snapshot (SIGUSR1) and return it once rewritten."""
    path = Path(path)
    pid = proc_or_pid if isinstance(proc_or_pid, int) else proc_or_pid.pid
    before = _file_version(path)
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # The server renames a complete file into place: a new version is a whole one.
        if _file_version(path) not in (before, None):
            return read_stats(path)
        time.sleep(0.002)
    raise TimeoutError(f"wb-server (pid {pid}) did not rewrite {path} within {timeout} s "
                       f"of SIGUSR1; was it started with --stats {path}?")


# struct counters_header in servers/stats.h: magic, fields, workers, slot_bytes,
# slots_offset, pid_offset, then the fields' names
_HEADER = struct.Struct("<8s5I")
_MAGIC = b"wbcount1"


class Counters:
    """wb-server's counters read where they live (its --counters file), at the reader's own
    instant: no signal for the event loop to answer after the dispatch call in progress, which
    made a snapshot tens of ms late on a saturated server. A reading has a snapshot's keys (the
    workers' summed counters, per_worker when several, monotonic_ns: when it was read)."""

    def __init__(self, path: Path | str, fd: int | None = None):
        self.path = Path(path)
        self._fd = fd  # in_memory's
        self._page: mmap.mmap | None = None

    @classmethod
    def in_memory(cls) -> Counters:
        """Counters in a memfd, which the server opens by the same /proc/self/fd path once
        given the descriptor (pass_fds): no file to map on the results' filesystem, none
        left behind."""
        fd = os.memfd_create("wb-server-counters")
        return cls(f"/proc/self/fd/{fd}", fd)

    @property
    def pass_fds(self) -> tuple[int, ...]:
        """The descriptors the server must inherit to open self.path."""
        return () if self._fd is None else (self._fd,)

    def read(self) -> dict[str, Any] | None:
        """The counters now; None until the server has mapped its file."""
        page = self._page or self._map()
        if page is None:
            return None
        _, fields, workers, slot_bytes, slots_offset, pid_offset = _HEADER.unpack_from(page)
        names = [n.decode() for n in bytes(page[_HEADER.size:slots_offset]).split(b"\0")[:fields]]
        slot = struct.Struct(f"<{fields}Q")
        before = time.monotonic_ns()
        raw = bytes(page[slots_offset:slots_offset + slot_bytes * workers])
        after = time.monotonic_ns()
        per_worker = [{"pid": struct.unpack_from("<i", raw, i * slot_bytes + pid_offset)[0],
                       **dict(zip(names, slot.unpack_from(raw, i * slot_bytes), strict=True))}
                      for i in range(workers)]
        reading: dict[str, Any] = {"workers": workers, "monotonic_ns": (before + after) // 2}
        reading.update({name: sum(w[name] for w in per_worker) for name in names})
        if workers > 1:
            reading["per_worker"] = per_worker
        return reading

    def close(self) -> None:
        page, self._page = self._page, None
        if page is not None:
            page.close()
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def _map(self) -> mmap.mmap | None:
        try:
            with self.path.open("rb") as f:
                page = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        except (FileNotFoundError, ValueError):  # ValueError: still empty (not truncated yet)
            return None
        magic, _, workers, *_ = _HEADER.unpack_from(page)
        if magic not in (_MAGIC, bytes(len(_MAGIC))):
            page.close()
            raise ValueError(f"{self.path} is not wb-server's counters file (magic {magic!r}); "
                             f"was it started with --counters {self.path}?")
        if workers == 0:  # the header is written before the worker count
            page.close()
            return None
        self._page = page
        return page


def wait_ready(proc: subprocess.Popen[Any], timeout: float) -> tuple[str, int]:
    """Read wb-server's `ready ADDR:PORT` line from its stdout (a pipe)."""
    assert proc.stdout is not None, "start wb-server with stdout=subprocess.PIPE"
    fd = proc.stdout.fileno()
    line = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                raise TimeoutError(f"wb-server printed no ready line within {timeout} s")
            chunk = os.read(fd, 1)  # byte by byte: nothing past the line is consumed
            if not chunk:
                raise RuntimeError(f"wb-server exited (status {proc.wait()}) before it was "
                                   f"ready; its stderr says why")
            line += chunk
    text = line.decode().strip()
    if not text.startswith("ready "):
        raise RuntimeError(f"wb-server said {text!r} instead of 'ready ADDR:PORT'")
    host, _, port = text.split()[1].rpartition(":")
    return host.strip("[]"), int(port)  # "[::1]:8080" -> ("::1", 8080)


@dataclass
class RunningServer:
    """A started wb-server and where it listens."""

    proc: subprocess.Popen[bytes]
    host: str
    port: int
    stats_path: Path | None

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def snapshot(self, timeout: float = 5.0) -> dict[str, Any]:
        if self.stats_path is None:
            raise ValueError("this server was started without stats_path")
        return snapshot_stats(self.proc, self.stats_path, timeout)

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM (the server writes its stats and exits 0), SIGKILL after timeout."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode


@contextlib.contextmanager
def running(cfg: ServerConfig, binary: Path | None = None, timeout: float = 10.0,
            preexec_fn: Callable[[], None] | None = None,
            stderr: Any = None, env: dict[str, str] | None = None,
            pass_fds: tuple[int, ...] = ()) -> Iterator[RunningServer]:
    """Start wb-server, wait for its ready line, and always stop it on the way out."""
    proc = subprocess.Popen(cfg.argv(binary), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=stderr, preexec_fn=preexec_fn, env=env, pass_fds=pass_fds)
    server = RunningServer(proc, "", 0, Path(cfg.stats_path) if cfg.stats_path else None)
    try:
        server.host, server.port = wait_ready(proc, timeout)
        yield server
    finally:
        server.stop()
