"""A QEMU (or virtme-ng) child whose console is read against a deadline and which is stopped
with every process it started: a guest must leave no qemu or virtiofsd behind."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable

import psutil

STOP_GRACE_S = 5.0


class Console:
    """The child's merged stdout and stderr, as text read so far."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None):
        # a session of its own: its process group is the guest's, signalled as a whole
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.text = ""
        self.closed = False  # the child closed its output: it is ending on its own

    def read_until(self, deadline: float, done: Callable[[str], bool] = lambda _: False) -> bool:
        """Reads until the child closes its output, done(text) holds, or the monotonic
        deadline passes; True unless the deadline passed."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while not done(self.text):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                self.closed = True
                return True
            self.text += chunk.decode(errors="replace")
        return True

    def tail(self, lines: int = 15) -> str:
        kept = [ln.rstrip() for ln in self.text.replace("\r", "\n").splitlines() if ln.strip()]
        return "\n".join(kept[-lines:])

    def stop(self) -> int | None:
        """Stops the child and all its descendants (asked, then killed); its exit status
        (negative: the signal that ended it), None when it had to be killed. A child that
        closed its output is given STOP_GRACE_S to exit first: its status is then its own,
        not the stop's."""
        try:
            family = [psutil.Process(self.proc.pid), *psutil.Process(self.proc.pid).children(
                recursive=True)]
        except psutil.NoSuchProcess:
            family = []
        status = self.proc.poll()
        if status is None and self.closed:
            try:
                status = self.proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        if status is None:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                status = self.proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                status = None
        _signal_group(self.proc.pid, signal.SIGKILL)
        for process in family:  # those that left the group (a daemonised virtiofsd)
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(family, timeout=STOP_GRACE_S)
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return status


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
