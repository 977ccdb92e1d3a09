"""Hostile scenario files and `--set`s against `wanbench run`: each must be refused at once,
exit 2, with one line on stderr and no traceback, within bounded time and memory.

Each case is built in a temporary directory of its own (a scenario, maybe a topology, a FIFO,
a file of secrets), run as `wanbench run` with a time limit and an address-space limit
(RLIMIT_AS), and reported: exit status, traceback or not, seconds, peak RSS, hung or not.
tests/runner/test_hostile_input.py runs the same table.

    .venv/bin/python scripts/chaos_hostile.py [--only NAME ...] [--timeout 30]

Exit 0 when every case held; 1 when any tracebacked, hung, printed more than one line or
exited other than 2 (the failing cases are listed).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MEMORY_LIMIT_BYTES = 1 << 30  # RLIMIT_AS; a refused run peaks near 400 MB of address space
TIMEOUT_S = 30.0  # a refusal takes 1-2 s, mostly imports; past this the case hung
FIFO = object()  # a file content: make a FIFO there instead
# A topology file that is someone's secrets: an error may quote at most one of its lines.
SECRETS = "".join(f"secret-{i}-{'x' * 30}: {i}\n" for i in range(20))


@dataclass(frozen=True)
class Case:
    """A hostile input and a fragment of the one line it must be refused with."""

    name: str
    scenario: str | bytes  # the text of scenario.yaml, or bytes as they are
    says: str
    sets: tuple[str, ...] = ()
    files: dict[str, object] = field(default_factory=dict)  # more files beside it
    run: str = "scenario.yaml"  # what `wanbench run` is given, relative to the directory


def laughs(levels: int = 10) -> str:
    """The billion-laughs file: each level nine aliases of the one before."""
    lines = ["name: laughs", 'l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


EXTERNAL = ("name: ext\nserver: {{kind: external, name: x, port: 9, command: [{command}]{more}}}"
            "\n")


def topology(delay_ms: float) -> str:
    """A namespace topology whose link's delay is on line 7."""
    return ("name: t\nhosts: {s: {role: server}, c: {role: hot}}\nlinks:\n  l:\n    a: c\n"
            f"    b: s\n    delay_ms: {delay_ms}\n")


CASES = [
    # files that are not scenario text
    Case("topology-kmsg", "name: k\ntopology: {file: /proc/kmsg}\n", "/proc/kmsg"),
    Case("topology-fifo", "name: f\ntopology: {file: fifo.yaml}\n", "a FIFO, not a regular file",
         files={"fifo.yaml": FIFO}),
    Case("topology-device", "name: d\ntopology: {file: /dev/zero}\n", "a character device"),
    Case("topology-secrets", "name: s\ntopology: {file: secrets.txt}\n", "secrets.txt",
         files={"secrets.txt": SECRETS}),
    Case("scenario-directory", "", "a directory, not a regular file", run="."),
    Case("too-large", "name: big\ndescription: " + "x" * (2 << 20) + "\n", "bytes; a scenario"),
    Case("not-utf8", b"name: n\ndescription: \xff\xfe\n", "not UTF-8"),
    Case("binary", bytes(range(256)) * 4, "not UTF-8"),
    Case("control-characters", b"name: c\ndescription: \x00\x01\x02\n", "non-printable"),
    # YAML built to exhaust the parser
    Case("billion-laughs", laughs(), "aliases are expanded"),
    Case("recursive-alias", "name: r\nx: &c [*c]\n", "repeats its own anchor"),
    Case("deep-nesting", "name: deep\ndescription: " + "[" * 5000 + "]" * 5000 + "\n",
         "nested more than"),
    Case("huge-integer", "name: i\nrepetitions: " + "9" * 5001 + "\n", "5001 digits"),
    Case("duplicate-key", "name: d\nduration_s: 1\nduration_s: 2\n", "appears twice"),
    Case("binary-tag", "name: !!binary dGFnZ2Vk\n", "scenario.yaml:1: tag"),
    Case("python-tag", "name: !!python/name:os.system\n", "scenario.yaml:1: tag"),
    Case("long-name", "name: " + "a" * 300 + "\n", "up to 64"),
    # numbers that would run for ever or fail every point
    Case("duration-inf", "name: n\nduration_s: .inf\n", "duration_s: wants a finite number"),
    Case("duration-1e30", "name: n\nduration_s: 1e30\n", "duration_s: must be at most"),
    Case("warmup-inf", "name: n\nwarmup_s: .inf\n", "warmup_s"),
    Case("ready-timeout-1e30", EXTERNAL.format(command="srv", more=", ready_timeout_s: 1e30"),
         "server.ready_timeout_s"),
    Case("rate-inf", "name: n\nhot: {rate_rps: .inf}\n", "hot.rate_rps"),
    Case("ramp-inf", "name: n\ncold: {conns: 1, ramp_rps: .inf}\n", "cold.ramp_rps"),
    Case("interval-inf", "name: n\ncold: {conns: 1, interval_s: .inf}\n", "cold.interval_s"),
    Case("timeout-inf", "name: n\nhot: {response_timeout_s: .inf}\n", "hot.response_timeout_s"),
    Case("stream-mbps-inf", "name: n\nstream: {conns: 1, mbps: .inf}\n", "stream.mbps"),
    Case("backlog-1e20", "name: n\nserver: {backlog: 100000000000000000000}\n",
         "server.backlog"),
    Case("reply-bytes-1e12", EXTERNAL.format(command="srv", more=", reply_bytes: 1000000000000"),
         "server.reply_bytes"),
    # sweeps too large to build
    Case("range-1e9", "name: r\nsweep:\n  cold.conns: {start: 0, stop: 1e9, step: 1}\n",
         "a range of 1,000,000,001 values"),
    Case("range-stop-inf", "name: r\nsweep:\n  cold.conns: {start: 0, stop: .inf, step: 1}\n",
         "finite"),
    Case("range-step-1e-12", "name: r\nsweep:\n  cold.conns: {start: 0, stop: 1, step: 1e-12}\n",
         "a larger step"),
    Case("grid-1000-cubed", "name: g\nsweep:\n" + "".join(
        f"  {path}: {{start: 1, stop: 1000, step: 1}}\n"
        for path in ("cold.conns", "hot.conns", "server.reply_bytes")), "1,000 × 1,000 × 1,000"),
    # external-server templates
    Case("template-format-spec", EXTERNAL.format(command='"{port:>3000000000}"', more=""),
         "uses {port:>3000000000}"),
    Case("template-attribute", EXTERNAL.format(
        command='"{workdir.__class__.__init__.__globals__}"', more=""), "no attributes"),
    # --set
    Case("set-unclosed-list", "name: s\n", "--set 'cold.conns=['", sets=("cold.conns=[",)),
    Case("set-through-a-value", "name: s\n", "name is a str, not a section", sets=("name.x=1",)),
    Case("set-reserved-character", "name: s\n", "--set 'hot.path=@10.0.0.1/'",
         sets=("hot.path=@10.0.0.1/",)),
    Case("set-names-itself", "name: s\nhot: {conns: 1}\n", "--set 'hot.conns=x': hot.conns",
         sets=("hot.conns=x",)),
    # errors that point at the fix
    Case("did-you-mean", "name: t\nduraton_s: 3\n", "did you mean duration_s?"),
    Case("topology-file-line", "name: t\ntopology: {file: topo.yaml}\n",
         "topo.yaml:7: links.l.delay_ms", files={"topo.yaml": topology(-1)}),
]


@dataclass
class Outcome:
    case: Case
    exit_status: int | None  # None: killed after the time limit
    stderr: str
    seconds: float
    peak_rss_mb: float
    run_dirs: int  # created under --out

    @property
    def hung(self) -> bool:
        return self.exit_status is None

    @property
    def traceback(self) -> bool:
        return "Traceback" in self.stderr

    @property
    def lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]

    def problems(self) -> list[str]:
        """What this case did that it must not; empty when it held."""
        found = []
        if self.hung:
            found.append("hung")
        elif self.exit_status != 2:
            found.append(f"exit {self.exit_status}")
        if self.traceback:
            found.append("traceback")
        if len(self.lines) != 1:
            found.append(f"{len(self.lines)} lines on stderr")
        if self.case.says not in self.stderr:
            found.append(f"no {self.case.says!r} in the message")
        if sum(f"secret-{i}-" in self.stderr for i in range(20)) > 1:
            found.append("quotes more than one line of a file")
        if self.run_dirs:
            found.append("created a run directory")
        return found


def build(case: Case, where: Path) -> Path:
    """The case's files in where; returns what `wanbench run` is given."""
    scenario = where / "scenario.yaml"
    if isinstance(case.scenario, bytes):
        scenario.write_bytes(case.scenario)
    else:
        scenario.write_text(case.scenario)
    for name, content in case.files.items():
        if content is FIFO:
            os.mkfifo(where / name)
        else:
            (where / name).write_text(str(content))
    return where / case.run


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def run_case(case: Case, timeout_s: float = TIMEOUT_S) -> Outcome:
    with tempfile.TemporaryDirectory(prefix=f"hostile-{case.name}-") as tmp:
        where = Path(tmp)
        target = build(case, where)
        out, err = where / "out", where / "stderr.txt"
        argv = [sys.executable, "-m", "harness.cli", "run", str(target), "--out", str(out)]
        argv += [arg for text in case.sets for arg in ("--set", text)]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        start = time.monotonic()
        with err.open("w") as stderr:
            proc = subprocess.Popen(argv, cwd=where, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=stderr, env=env,
                                    preexec_fn=_limit_memory, start_new_session=True)
        status, peak_kb = _wait(proc, start + timeout_s)
        seconds = time.monotonic() - start
        return Outcome(case, status, err.read_text(errors="replace"), seconds,
                       peak_kb / 1024, len(list(out.iterdir())) if out.exists() else 0)


def _high_water_kb(pid: int) -> int:
    """The process's peak resident set so far (VmHWM), 0 once it is gone. Not wait4's
    ru_maxrss: Linux carries the forking parent's peak into the child's across exec, so a
    child of a large process (a long pytest) would read as large as its parent."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    return int(found.group(1)) if found else 0


def _wait(proc: subprocess.Popen, deadline: float) -> tuple[int | None, int]:
    """Exit status (None when killed at the deadline) and the child's peak resident set in
    kB, sampled every 10 ms (RLIMIT_AS bounds it between samples)."""
    peak = 0
    while True:
        peak = max(peak, _high_water_kb(proc.pid))
        pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, peak
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            os.wait4(proc.pid, 0)
            proc.returncode = -signal.SIGKILL
            return None, peak
        time.sleep(0.01)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these cases")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per case")
    args = parser.parse_args()
    cases = [c for c in CASES if not args.only or c.name in args.only]
    print(f"{'case':24} {'exit':>4} {'traceback':>9} {'seconds':>7} {'peak MB':>7} "
          f"{'hung':>4}  verdict")
    failed = []
    for case in cases:
        outcome = run_case(case, args.timeout)
        problems = outcome.problems()
        if problems:
            failed.append(case.name)
        print(f"{case.name:24} {outcome.exit_status if not outcome.hung else '-':>4} "
              f"{'yes' if outcome.traceback else 'no':>9} {outcome.seconds:7.2f} "
              f"{outcome.peak_rss_mb:7.0f} {'yes' if outcome.hung else 'no':>4}  "
              f"{'; '.join(problems) or 'held'}", flush=True)
    print(f"{len(cases) - len(failed)} of {len(cases)} held" +
          (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
