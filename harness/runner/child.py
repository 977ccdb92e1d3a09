"""A run in a process of its own: `python -m harness.runner --request JSON --result FILE`
runs the RunRequest and writes its RunResult to FILE (exit status: the run's). What the
run says goes to standard error, plain (PlainDisplay). ChildRun starts one and waits for it.

A caller takes a child process where the run must be elsewhere than the caller: in a guest's
kernel (harness.runner.kernels), in a topology host's network namespace (a cluster's run,
harness.cluster.run, which adds its hosts), or in a fresh interpreter of its own."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from clients.atomic import write_atomic
from harness import interrupts
from harness.runner.display import PlainDisplay
from harness.runner.outcome import RESULT_JSON, RunRequest, RunResult
from harness.runner.refusal import EXIT_REFUSED, RunRefused
from harness.runner.scenario_run import Hosts, run_scenario

ENTRY = [sys.executable, "-m", "harness.runner"]
PROG = "python -m harness.runner"
# how long a stopped child may take to tear its topology down and keep its points
STOP_TIMEOUT_S = 120.0


class ChildFailed(RuntimeError):
    """The child gave no result: refused before its run began, or it crashed; the message
    says which, with its exit status."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--request", required=True, help="the RunRequest as JSON")
    parser.add_argument("--result", required=True, type=Path,
                        help="where the RunResult is written as JSON")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return serve(parser.parse_args(argv), None, PROG)


def serve(args: argparse.Namespace, hosts: Hosts | None, prog: str,
          refusals: tuple[type[Exception], ...] = ()) -> int:
    """Runs args.request (on hosts, if given) and writes its result; a refusal (RunRefused,
    or one of refusals) is one line on standard error and EXIT_REFUSED."""
    with interrupts.raising():  # stop signals from the first instant, as `wanbench` does
        try:
            request = RunRequest.model_validate_json(args.request)
            result = run_scenario(request, PlainDisplay(), hosts)
        except (RunRefused, *refusals) as exc:
            print(f"{prog}: {exc}", file=sys.stderr, flush=True)
            return EXIT_REFUSED
        except interrupts.Interrupted as exc:  # before its run directory existed
            print(f"{prog}: {exc.reason}", file=sys.stderr, flush=True)
            return exc.exit_status
    write_atomic(args.result, RESULT_JSON.dump_json(result))
    return result.status


def child_argv(request: RunRequest, result: Path, entry: Sequence[str] = ENTRY) -> list[str]:
    return [*entry, "--request", request.model_dump_json(), "--result", str(result)]


def read_result(path: Path, status: int) -> RunResult:
    """The result a child wrote at path; ChildFailed when it wrote none."""
    try:
        return RESULT_JSON.validate_json(path.read_bytes())
    except FileNotFoundError:
        raise ChildFailed(f"the run exited with status {status} before it began (refused, or "
                          f"crashed: its output says why)") from None


class ChildRun:
    """A run started in a child process: entry (ENTRY, or a cluster's) after prefix (a
    namespace's, a CPU's); its output captured when asked, else on this process's own."""

    def __init__(self, request: RunRequest, prefix: Sequence[str] = (),
                 entry: Sequence[str] = ENTRY, capture: bool = False):
        self.scratch = tempfile.TemporaryDirectory(prefix="wanbench-run-")
        self.result_path = Path(self.scratch.name) / "result.json"
        pipe = subprocess.PIPE if capture else None
        self.process = subprocess.Popen(
            [*prefix, *child_argv(request, self.result_path, entry)], stdout=pipe,
            stderr=pipe, text=True)
        self.stdout = self.stderr = ""

    def poll(self) -> int | None:
        return self.process.poll()

    def wait(self, timeout: float | None = None) -> RunResult:
        """Its result (ChildFailed: none). Stopped meanwhile, the child gets the signal and
        tears down its own topology and processes (subprocess.run would SIGKILL it and leave
        them to `topo clean`) before Interrupted goes on."""
        try:
            self.stdout, self.stderr = (s or "" for s in self.process.communicate(
                timeout=timeout))
        except interrupts.Interrupted as stop:
            self._stop(stop.signum)
            raise
        try:
            return read_result(self.result_path, self.process.returncode)
        finally:
            self.scratch.cleanup()

    def _stop(self, signum: int) -> None:
        if self.process.poll() is None:
            # a terminal's ^C reached it already, and a run ignores a second stop signal
            self.process.send_signal(signum)
            try:
                self.process.communicate(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.communicate()
        self.scratch.cleanup()
